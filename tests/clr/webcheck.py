# The helpers of tests/clr/web.sh's python checkers (imported with tests/clr on sys.path):
# a check's "ok"/"FAIL" line, and the spans of one of the tracer's OTLP JSON lines files.
import json


def check(cond, msg, detail=""):
    """Prints "ok   - msg" or "FAIL - msg" and, on a failure, the detail (cut at 1500 chars)."""
    print(("ok   - " if cond else "FAIL - ") + msg)
    if not cond and detail:
        print("       " + str(detail)[:1500])


def spans(path, svc=None):
    """Every span of the OTLP JSON lines file at path, each its dict with "scope" (its scope's
    name), "attrs" (key -> the value's one field), "svc" (svc) and "dur" (ms) added."""
    out = []
    for line in open(path):
        for rs in json.loads(line)["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for s in ss["spans"]:
                    s["scope"] = ss["scope"]["name"]
                    s["attrs"] = {a["key"]: next(iter(a["value"].values())) for a in s.get("attributes", [])}
                    s["svc"] = svc
                    s["dur"] = (int(s["endTimeUnixNano"]) - int(s["startTimeUnixNano"])) / 1e6
                    out.append(s)
    return out
