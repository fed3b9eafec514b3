"""Webhooks on events: signed deliveries, retried, logged."""
