"""TLS contexts and streams, and RocketMQ's ACL signing hooks."""
