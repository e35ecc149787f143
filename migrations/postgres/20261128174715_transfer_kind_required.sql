-- Modify "transfers" table
ALTER TABLE "transfers" ALTER COLUMN "kind" SET NOT NULL;
