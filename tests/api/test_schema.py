"""schemathesis against the API's own OpenAPI schema, served by the real server: no
generated request, however odd, gets a 5xx, and every response matches the schema."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import response_schema_conformance, status_code_conformance

from .conftest import make_project


@pytest.fixture(scope="package")
def annotator_token(stack) -> str:
    make_project(stack, "fuzz", n_tasks=30)
    return stack.enroll("fuzz", "ann-fuzz")


@pytest.fixture(scope="package")
def api_schema(stack, annotator_token):
    return schemathesis.openapi.from_url(stack.base + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=15, deadline=None, derandomize=True, database=None,
          phases=[Phase.explicit, Phase.generate],
          suppress_health_check=list(HealthCheck))
@pytest.mark.timeout(120)
def test_no_server_errors(case, stack, annotator_token):
    # Given the right kind of token for the endpoint (operator or annotator)
    token = stack.operator_token if "operator" in (case.operation.tags or []) \
        else annotator_token
    # When the generated request is sent to the running server
    # Then no 5xx, and the status code and body are the documented ones
    case.call_and_validate(base_url=stack.base,
                           headers={"Authorization": f"Bearer {token}"},
                           checks=[not_a_server_error, status_code_conformance,
                                   response_schema_conformance])
