"""A durable Gemini agent for the signed-reply crash test, run as a real process:

    python durable_signed.py DB BASE_URL RUN_ID MARKER

runs (or recovers) RUN_ID against the local server at BASE_URL and prints how it ended as
JSON. Its tool kills the process (as a SIGKILL would) the first time it is called, when
MARKER does not exist yet: after the model's signed reply was stored, before the tool's
outcome was."""

import json
import os
import sys

from google import genai

from forge import AgentLoop, Finish, tool
from forge.durable import shutdown
from forge.models.gemini import GeminiPolicy

db, base_url, run_id, marker = sys.argv[1:5]


@tool
def weather(city: str) -> str:
    """Today's weather in a city."""
    if not os.path.exists(marker):
        open(marker, "w").close()
        os._exit(9)
    return "4 °C, rain"


policy = GeminiPolicy("gemini-3-pro-preview", client=genai.Client(api_key="unused", http_options={"base_url": base_url}))
durable = AgentLoop([weather], policy, verify=lambda o: isinstance(o.payload, Finish)).durable(name="signed", db=db)
durable.launch()
result = durable.wait(durable.start("Weather in Oslo?", run_id=run_id), timeout=120)
print(json.dumps({"status": result.status, "reason": result.reason}), flush=True)
shutdown()
