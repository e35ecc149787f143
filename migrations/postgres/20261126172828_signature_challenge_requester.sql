-- Modify "signature_challenges" table
ALTER TABLE "signature_challenges" ADD COLUMN "requester" character varying NOT NULL DEFAULT '';
-- Create index "signaturechallenge_wallet_address_requester_created_at" to table: "signature_challenges"
CREATE INDEX "signaturechallenge_wallet_address_requester_created_at" ON "signature_challenges" ("wallet_address", "requester", "created_at");
