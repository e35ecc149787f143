-- Modify "payments" table
ALTER TABLE "payments" ADD COLUMN "settlement_fiat_amount" character varying NULL, ADD COLUMN "settlement_fiat_currency" character varying NULL, ADD COLUMN "settlement_chain" character varying NULL, ADD COLUMN "settlement_address" character varying NULL, ADD COLUMN "settlement_error" character varying NULL;
