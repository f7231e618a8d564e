"""Stand-ins for a consumer where only what it is sent matters."""

import json


class RecordingTree:
    """Stands in for Dynamo's RadixTree: records each (worker, event) it is
    sent, decoded, and rejects nothing."""

    def __init__(self):
        self.payloads = []

    def apply_event(self, worker, payload):
        self.payloads.append((worker, json.loads(payload)))
