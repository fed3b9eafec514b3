"""Installing a tunneled agent from its Tokens page: one click makes the manifest (with a new
token, shown this once) and another copies it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from playwright.sync_api import Page, expect

from webapp import agents, tokens

from .conftest import clipboard_holding, copy_by_click
from .signin import sign_in

pytestmark = pytest.mark.browser


def test_a_maintainer_gets_the_manifest_and_copies_it(page: Page, h: Any, app: Any,
                                                       clipboard: None) -> None:
    h.user("alice", "maintainer")
    with app.app_context():
        agents.create("prod", tunnel=True)
    sign_in(page, path="/agents/prod/tokens")
    page.get_by_role("button", name="Install the agent…").click()

    shown = page.locator("#install-manifest")
    expect(shown).to_contain_text("kind: Deployment")
    copy_by_click(page, page.get_by_role("button", name="Copy"))
    copied = clipboard_holding(page, "kind: Deployment")
    docs = list(yaml.safe_load_all(copied))
    assert docs[-1]["kind"] == "Deployment"
    env = {e["name"]: e.get("value") for e in docs[-1]["spec"]["template"]["spec"]
           ["containers"][0]["env"]}
    assert env["AGENTWATCH_AGENT_URL"] == app.config["BASE_URL"]  # the public address
    # ... which is this machine's own by default: the page says a pod cannot reach it.
    expect(page.locator(".warning").first).to_contain_text("a pod in the cluster cannot reach")
    with app.app_context():  # the token in it works, and is listed as the agent's
        secret = next(d for d in docs if d["kind"] == "Secret")
        assert tokens.authenticate(secret["stringData"]["token"]).agent().name == "prod"
    expect(page.get_by_role("table")).to_contain_text("agent-")


def _secrets_rule(manifest_text: str) -> list[str]:
    """The verbs the generated ClusterRole grants on Secrets."""
    role = next(d for d in yaml.safe_load_all(manifest_text) if d["kind"] == "ClusterRole")
    return next((rule["verbs"] for rule in role["rules"]
                 if rule["apiGroups"] == [""] and "secrets" in rule["resources"]), [])


@pytest.mark.parametrize(("choice", "said", "verbs"), [
    ("Names only", "names only", ["list", "watch"]),
    ("Names and keys (values blanked by the agent)", "names, types and keys",
     ["get", "list", "watch"]),
    ("None", "no Secrets", []),
])
def test_the_install_page_says_what_the_manifest_grants(page: Page, h: Any, app: Any,
                                                        choice: str, said: str,
                                                        verbs: list[str]) -> None:
    h.user("alice", "maintainer")
    with app.app_context():
        agents.create("prod", tunnel=True)
    sign_in(page, path="/agents/prod/tokens")
    page.get_by_label(choice, exact=True).check()
    page.get_by_role("button", name="Install the agent…").click()
    page.wait_for_load_state("load")  # the page the form answers with, whole
    manifest_text = page.locator("#install-manifest").text_content() or ""
    expect(page.locator(".install-says")).to_contain_text(said)
    assert _secrets_rule(manifest_text) == verbs
    assert "&id" not in manifest_text and "*id" not in manifest_text  # no YAML anchors
    args = next(d for d in yaml.safe_load_all(manifest_text)
                if d["kind"] == "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:3] == ["agent", "--secrets", {"Names only": "names", "None": "none"}.get(
        choice, "keys")]
    with page.expect_download() as info:
        page.get_by_role("button", name="Download").click()
    assert info.value.suggested_filename == "agentwatch-agent-prod.yaml"
    assert Path(info.value.path()).read_text() == manifest_text


def test_an_agent_without_a_tunnel_offers_no_install(page: Page, h: Any) -> None:
    h.user("alice", "maintainer")
    h.agent("prod")
    sign_in(page, path="/agents/prod/tokens")
    expect(page.get_by_role("button", name="Create token")).to_be_visible()
    expect(page.get_by_role("button", name="Install the agent…")).to_have_count(0)


def test_a_new_token_is_copied_with_one_click(page: Page, h: Any, clipboard: None) -> None:
    h.user("alice", "maintainer")
    h.agent("prod")
    sign_in(page, path="/agents/prod/tokens")
    page.get_by_label("New token name").fill("deploy-ci")
    page.get_by_role("button", name="Create token").click()
    shown = page.get_by_label("New token", exact=True).input_value()
    copy_by_click(page, page.get_by_role("button", name="Copy"))
    assert clipboard_holding(page, shown) == shown
    assert page.locator('link[rel="icon"]').count() == 1


# A browser may refuse the clipboard (no permission, the window not focused) or leave its
# answer pending (a permission prompt left open, a busy browser).
REFUSED = """() => { navigator.clipboard.writeText = () =>
    Promise.reject(new DOMException("Document is not focused.", "NotAllowedError")); }"""
UNANSWERED = "() => { navigator.clipboard.writeText = () => new Promise(() => {}); }"


@pytest.mark.parametrize("clipboard_is", [REFUSED, UNANSWERED], ids=["refused", "unanswered"])
def test_a_copy_that_fails_leaves_the_token_selected(page: Page, h: Any,
                                                     clipboard_is: str) -> None:
    """Then the token is selected for Ctrl+C (within seconds), and the page says so."""
    h.user("alice", "maintainer")
    h.agent("prod")
    sign_in(page, path="/agents/prod/tokens")
    page.get_by_label("New token name").fill("deploy-ci")
    page.get_by_role("button", name="Create token").click()
    token = page.get_by_label("New token", exact=True)
    shown = token.input_value()
    page.wait_for_load_state("load")  # the page script that handles Copy has run
    page.evaluate(clipboard_is)
    page.get_by_role("button", name="Copy").click()
    said = page.locator(".copied")
    expect(said).to_have_text("Selected: press Ctrl+C to copy")
    expect(said).to_be_visible()
    expect(token).to_be_focused()
    assert token.evaluate("el => el.value.slice(el.selectionStart, el.selectionEnd)") == shown


def test_the_new_agent_form_checks_the_name_as_it_is_typed(page: Page, h: Any) -> None:
    """The name's pattern is a valid expression where Chrome compiles it (with the `v`
    flag): an invalid one is ignored, and any name passed the browser's check."""
    h.user("alice", "maintainer")
    sign_in(page, path="/agents/new")
    name = page.get_by_label("Name")
    pattern = name.get_attribute("pattern")
    assert page.evaluate("p => { new RegExp(p, 'v'); return true; }", pattern)
    for typed, valid in (("prod-eu-1", True), ("Prod", False), ("-edge", False), ("a", True)):
        name.fill(typed)
        assert name.evaluate("el => el.checkValidity()") is valid, typed


def test_revoking_a_token_is_confirmed_in_the_pages_dialog(page: Page, h: Any) -> None:
    h.user("alice", "maintainer")
    h.agent_with_token("prod")
    page.on("dialog", lambda d: (_ for _ in ()).throw(AssertionError("a native dialog")))
    sign_in(page, path="/agents/prod/tokens")
    dialog = page.locator("#confirm-dialog")
    page.get_by_role("button", name="Revoke").click()
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Agents using it are refused at once.")
    dialog.get_by_role("button", name="Cancel").click()
    expect(page.get_by_role("table")).to_contain_text("Active")

    page.get_by_role("button", name="Revoke").click()
    dialog.get_by_role("button", name="Revoke").click()  # it says what it does
    expect(page.get_by_role("table")).to_contain_text("Revoked")
