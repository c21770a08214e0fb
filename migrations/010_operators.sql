-- Operators with tokens of their own, and the trail of every change an
-- operator makes (deploy/OPERATING.md, "Operators"). Owned by orders/pgstore.

-- A named operator's credential. The token is kept only as its SHA-256:
-- it is 32 random bytes, so the digest is as good as the token to
-- recognise it and worthless to whoever reads this table. A revoked token
-- keeps its row (the trail names its operator), and the name may be given
-- again.
CREATE TABLE operators (
    id           bigserial PRIMARY KEY,
    name         text NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9._-]{0,63}$' AND name <> 'root'),
    scope        text NOT NULL CHECK (scope IN ('read', 'write')),
    token_sha256 bytea NOT NULL UNIQUE CHECK (length(token_sha256) = 32),
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);
CREATE UNIQUE INDEX operators_live_name ON operators (name) WHERE revoked_at IS NULL;

-- The trail: one row per change an operator made, written in the change's
-- own transaction when the change is PostgreSQL's, so a change and its
-- entry commit together or not at all. operator is the name (root for
-- SECKILL_ADMIN_TOKEN, cli:<account> for the seckill command), action the
-- kind (voucher.create, voucher.change, breaker.switch...), target what
-- it changed, change what was asked (JSON). One operator's Idempotency-Key
-- makes one change, ever: the unique index is what stops a retry from
-- applying a change twice, on any gateway.
CREATE TABLE operator_actions (
    id              bigserial PRIMARY KEY,
    at              timestamptz NOT NULL DEFAULT now(),
    operator        text NOT NULL,
    action          text NOT NULL,
    target          text NOT NULL,
    request_id      text NOT NULL DEFAULT '',
    idempotency_key text,
    request_sha256  bytea,
    change          jsonb NOT NULL DEFAULT '{}'
);
CREATE UNIQUE INDEX operator_actions_key ON operator_actions (operator, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX operator_actions_at ON operator_actions (at);

-- Append-only: what was done stays written, whoever holds the database's
-- credentials of the service.
CREATE FUNCTION operator_actions_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the operators'' trail is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END
$$;
CREATE TRIGGER operator_actions_no_change BEFORE UPDATE OR DELETE ON operator_actions
    FOR EACH ROW EXECUTE FUNCTION operator_actions_append_only();
CREATE TRIGGER operator_actions_no_truncate BEFORE TRUNCATE ON operator_actions
    FOR EACH STATEMENT EXECUTE FUNCTION operator_actions_append_only();

-- The answer each keyed change was given, so that a retry with the same
-- key is answered as the first was. Apart from the trail, because it is
-- written after the change commits and forgotten after a day.
CREATE TABLE operator_answers (
    operator        text NOT NULL,
    idempotency_key text NOT NULL,
    at              timestamptz NOT NULL DEFAULT now(),
    status          int NOT NULL,
    content_type    text NOT NULL,
    body            bytea NOT NULL,
    PRIMARY KEY (operator, idempotency_key)
);
CREATE INDEX operator_answers_at ON operator_answers (at);
