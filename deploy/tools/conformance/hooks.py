"""Schemathesis hooks of `make conformance` (deploy/tools/conformance/run).

- A check that every response header is declared on the response of
  gateway/openapi.yaml that answered (or is one of HTTP's own), which
  Schemathesis's response_headers_conformance does not look for.
- A voucher the fuzzer creates ends after it begins (which no schema can
  say), so that most creations succeed and their links lead on to buys.
- After the fuzzer opens the breaker or pauses a voucher, it is put back, so
  that the rest of the run reaches the buy path instead of a wall of 503s.
"""

import os
from datetime import datetime, timedelta

import requests
import schemathesis

# What HTTP and fasthttp add to any answer; the document declares the rest.
TRANSPORT_HEADERS = {"date", "content-type", "content-length", "connection", "server", "transfer-encoding"}


@schemathesis.check
def undeclared_response_headers(ctx, response, case):
    """Every header of the answer is declared on its response object."""
    definition = case.operation.responses.find_by_status_code(response.status_code)
    if definition is None:
        return None  # status_code_conformance reports it
    declared = {name.lower() for name, _ in definition.headers.items()} if definition.headers else set()
    extra = sorted(h for h in response.headers if h not in TRANSPORT_HEADERS and h not in declared)
    if extra:
        raise AssertionError(
            f"{case.operation.label} answered {response.status_code} with headers its response "
            f"does not declare: {', '.join(extra)}"
        )
    return None


def _admin(method, path, body):
    url = os.environ["SECKILL_CONFORMANCE_URL"] + path
    token = os.environ["SECKILL_CONFORMANCE_ADMIN_TOKEN"]
    requests.request(method, url, json=body, headers={"Authorization": "Bearer " + token}, timeout=10)


@schemathesis.hook
def after_call(context, case, response):
    if response.status_code != 200:
        return
    op = case.operation.definition.raw.get("operationId")
    if op == "switchBreaker":
        _admin("PUT", "/api/v1/admin/breaker", {"mode": "auto"})
    elif op == "setVoucherState":
        _admin("PUT", case.formatted_path, {"state": "on_sale"})


def _time(v):
    try:
        return datetime.fromisoformat(v.replace("Z", "+00:00"))
    except (AttributeError, ValueError):
        return None


@schemathesis.hook
def map_body(context, body):
    if context.operation is None or context.operation.definition.raw.get("operationId") != "createVoucher":
        return body
    if not isinstance(body, dict):
        return body
    begin, end = _time(body.get("begin_at")), _time(body.get("end_at"))
    if begin is not None and end is not None and end <= begin:
        body["end_at"] = (begin + timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return body
