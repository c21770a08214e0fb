-- Reminders of a shopper's turn (notify/remind/README.md), owned by
-- notify/remind: where a shopper asked to be told when their turn comes
-- while their tab is closed. Each table keys on the user id alone, like
-- orders: tokens may come from an outside identity provider, so no users
-- row need exist.

-- A browser's Web Push subscription (the PushSubscription's endpoint and
-- keys); a user may have one per browser. The push service answers 404 or
-- 410 for one that is gone, and the row is then deleted.
CREATE TABLE push_subscriptions (
    endpoint   text        PRIMARY KEY CHECK (length(endpoint) BETWEEN 1 AND 1024),
    user_id    bigint      NOT NULL,
    p256dh     text        NOT NULL CHECK (length(p256dh) BETWEEN 1 AND 256),
    auth       text        NOT NULL CHECK (length(auth) BETWEEN 1 AND 256),
    lang       text        NOT NULL DEFAULT '',
    created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX push_subscriptions_user_idx ON push_subscriptions (user_id);

-- A shopper's e-mail address for reminders: personal data, kept in this
-- table only and never logged. Not verified (the shopper typed it; a
-- reminder is all it is used for).
CREATE TABLE reminder_emails (
    user_id    bigint      PRIMARY KEY,
    address    text        NOT NULL CHECK (length(address) BETWEEN 3 AND 254),
    lang       text        NOT NULL DEFAULT '',
    updated_at timestamptz NOT NULL DEFAULT now()
);
