-- Modify "card_requests" table
ALTER TABLE "card_requests" ADD COLUMN "reminded_at" timestamptz NULL;
-- Modify "spend_approvals" table
ALTER TABLE "spend_approvals" ADD COLUMN "reminded_at" timestamptz NULL;
