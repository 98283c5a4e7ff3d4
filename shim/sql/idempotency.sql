-- Ferry's idempotency records (docs/guides/idempotency.md): one row per user and
-- Idempotency-Key, written by the shim in the same transaction as the write it keys,
-- so the write and its record commit or vanish together. Create it once in the
-- database the shim serves (FERRY_MYSQL_DATABASE); the users who send keys need
-- SELECT, INSERT and DELETE on it. InnoDB: the record must be transactional.
CREATE TABLE IF NOT EXISTS ferry_idempotency (
  user_name   VARBINARY(255) NOT NULL,
  idem_key    VARBINARY(255) NOT NULL,
  fingerprint BINARY(32)     NOT NULL,
  answer      MEDIUMBLOB     NOT NULL,
  tag         BINARY(36)     NOT NULL,
  created     TIMESTAMP(6)   NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
  PRIMARY KEY (user_name, idem_key),
  KEY by_age (created)
) ENGINE=InnoDB;
