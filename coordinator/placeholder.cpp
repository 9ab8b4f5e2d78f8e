// Keeps the hipq_coordinator target non-empty while its sources land; remove once a real source is listed.
