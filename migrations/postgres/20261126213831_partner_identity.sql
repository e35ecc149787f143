-- Create "partner_attestations" table
CREATE TABLE "partner_attestations" ("id" uuid NOT NULL, "created_at" timestamptz NOT NULL, "updated_at" timestamptz NOT NULL, "partner" character varying NOT NULL, "jti" character varying NOT NULL, "subject" character varying NOT NULL, "issued_at" timestamptz NOT NULL, "expires_at" timestamptz NOT NULL, "agent_id" uuid NOT NULL, PRIMARY KEY ("id"), CONSTRAINT "partner_attestations_agents_partner_attestations" FOREIGN KEY ("agent_id") REFERENCES "agents" ("id") ON UPDATE NO ACTION ON DELETE NO ACTION);
-- Create index "partnerattestation_agent_id" to table: "partner_attestations"
CREATE INDEX "partnerattestation_agent_id" ON "partner_attestations" ("agent_id");
-- Create index "partnerattestation_partner_jti" to table: "partner_attestations"
CREATE UNIQUE INDEX "partnerattestation_partner_jti" ON "partner_attestations" ("partner", "jti");
