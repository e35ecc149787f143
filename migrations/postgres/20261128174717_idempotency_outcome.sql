-- Modify "idempotency_keys" table
ALTER TABLE "idempotency_keys" ADD COLUMN "answer" text NULL, ADD COLUMN "refusal" text NULL;
-- Answers kept before this release were one field per operation ({"send": ...}, {"withdrawal": ...}, {"checkout_payment": ...}) or {"error": ...}: the operation's field becomes the answer, the error the refusal
UPDATE "idempotency_keys" SET "answer" = COALESCE("outcome"::jsonb -> 'send', "outcome"::jsonb -> 'withdrawal', "outcome"::jsonb -> 'checkout_payment')::text, "refusal" = ("outcome"::jsonb -> 'error')::text WHERE "outcome" IS NOT NULL AND "outcome" <> '';
-- Modify "idempotency_keys" table
ALTER TABLE "idempotency_keys" DROP COLUMN "outcome";
