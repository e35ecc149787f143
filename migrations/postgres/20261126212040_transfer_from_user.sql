-- Modify "transfers" table
ALTER TABLE "transfers" ADD CONSTRAINT "transfer_one_sender" CHECK ((from_agent_id IS NULL) <> (from_user_id IS NULL)), ALTER COLUMN "from_agent_id" DROP NOT NULL, ADD COLUMN "from_user_id" uuid NULL;
-- Create index "transfer_from_user_id_created_at" to table: "transfers"
CREATE INDEX "transfer_from_user_id_created_at" ON "transfers" ("from_user_id", "created_at");
