-- Modify "refunds" table
ALTER TABLE "refunds" ADD COLUMN "reserved_token" bigint NOT NULL DEFAULT 0, ADD COLUMN "destination" character varying NOT NULL DEFAULT 'payer', ADD COLUMN "requested_with" character varying NULL, ADD COLUMN "merchant_key_id" uuid NULL, ADD COLUMN "dashboard_user_id" uuid NULL;
-- Refunds made after a payout before this release were advanced in full by the treasury: each reserved its whole amount, netted off the next batch as before
UPDATE refunds SET reserved_token = amount_token WHERE after_payout;
-- A refund to an address other than its payment's payer had it chosen by the merchant
UPDATE refunds SET destination = 'chosen' WHERE to_address <> COALESCE((SELECT p.from_address FROM payments p WHERE p.id = refunds.payment_id), '');
