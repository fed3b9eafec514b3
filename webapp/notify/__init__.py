"""Notifications of important events: in the app, in the browser, by email."""
