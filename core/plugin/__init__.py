"""The plugin machinery: hook specifications, registration records, the plugin manager (pluggy), the three
backend interfaces, and the toolkit blob store plugins build on (native TTL, obstore transfers, the
local file repository).
"""
