-- Modify "transfers" table
ALTER TABLE "transfers" ADD COLUMN "checkout_session_id" uuid NULL;
-- Create index "transfer_checkout_session_id" to table: "transfers"
CREATE INDEX "transfer_checkout_session_id" ON "transfers" ("checkout_session_id");
