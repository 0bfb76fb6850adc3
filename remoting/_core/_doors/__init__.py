"""The doors between an endpoint's loop thread and other threads."""
