-- Modify "payments" table
ALTER TABLE "payments" ADD COLUMN "sweep_submitted_at" timestamptz NULL, ADD COLUMN "swept_at" timestamptz NULL;
