"""Kafka as the point log several Sparkwire servers share, read by Spark's built-in Kafka source."""
