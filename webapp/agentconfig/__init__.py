"""Agent configuration: versioned YAML documents, validated, with their activity events."""
