"""EventBridge's pattern semantics, as moto implements them, for the tests:
reads a JSON array of [pattern, event] pairs on stdin and prints a JSON
array of booleans, one per pair (tests/api/events_pipes.rs)."""
import json
import sys

from moto.events.models import EventPattern

pairs = json.load(sys.stdin)
print(json.dumps([EventPattern.load(json.dumps(pattern)).matches_event(event) for pattern, event in pairs]))
