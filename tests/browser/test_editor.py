"""The configuration editor in a real browser, under the real Content-Security-Policy:
CodeMirror loads with no CSP violation, the server's problems are marked at their line and
listed with links that move the cursor, the changes are shown before a save, and a refused
save stays on the page and records nothing."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from webapp import agents
from webapp.agentconfig import reading, service

from .signin import sign_in

pytestmark = pytest.mark.browser

IN_FORCE = "gitops:\n  namespaces: [apps]\nnotifications:\n  important:\n    levels: [error]\n"
# Line 4, column 14: the value `root`.
INVALID = "gitops:\n  namespaces: [apps]\nuser_access:\n  access_as: root\n"
SETTINGS = "/agents/prod/settings"
EDITOR = "#config-editor .cm-editor"


@pytest.fixture
def page(browser: Browser, live_server: str) -> Iterator[Page]:
    """As the suite's page (script errors, failed requests, modules that do not load and CSP
    violations fail the test), except for the 422 of a refused save, which is the answer
    under test."""
    context = browser.new_context(base_url=live_server, viewport={"width": 1200, "height": 900},
                                  timezone_id="UTC", locale="en-GB")
    context.set_default_timeout(15_000)
    errors: list[str] = []
    tab = context.new_page()
    tab.on("pageerror", lambda exc: errors.append(f"script error: {exc}"))

    def response(r: Any) -> None:
        refused_save = (r.status == 422 and r.request.method == "POST"
                        and r.url.split("#")[0].endswith(SETTINGS))
        if r.status >= 400 and not refused_save:
            errors.append(f"HTTP {r.status} for {r.url}")
    tab.on("response", response)
    tab.on("console", lambda m: errors.append(f"console: {m.text}")
           if m.type == "error" and ("Content Security Policy" in m.text
                                     or "module script" in m.text) else None)
    try:
        yield tab
    finally:
        context.close()
    assert not errors, "\n".join(errors)


@pytest.fixture
def maintainer(h: Any, app: Any) -> None:
    h.user("alice", "maintainer")
    with app.app_context():
        service.submit(agents.create("prod"), IN_FORCE, source="ui", by="alice")


def replace_text(page: Page, text: str) -> None:
    page.locator(f"{EDITOR} .cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    # Typed as a paste would: no auto-indent in between.
    page.keyboard.insert_text(text)


def cursor(page: Page) -> dict[str, Any]:
    """The editor's cursor as 1-based line and column, and whether it has the focus."""
    return page.evaluate("""() => {
        const CM = window.AgentwatchCodeMirror;
        const view = CM.EditorView.findFromDOM(document.querySelector('#config-editor .cm-editor'));
        const head = view.state.selection.main.head, line = view.state.doc.lineAt(head);
        return {line: line.number, column: head - line.from + 1, focused: view.hasFocus};
    }""")


def config_events(h: Any) -> list[str]:
    return [e.type for e in h.events() if e.category == "configuration"]


def test_the_editor_loads_under_the_csp(page: Page, maintainer: None) -> None:
    sign_in(page, path=SETTINGS)
    editor = page.locator(EDITOR)
    expect(editor).to_be_visible()
    expect(page.locator("#config-text")).to_be_hidden()  # still the form's field
    expect(editor.locator(".cm-lineNumbers .cm-gutterElement", has_text="5")).to_be_visible()
    expect(editor.locator(".tok-propertyName", has_text="gitops")).to_be_visible()
    # CodeMirror's <style> got in by this response's nonce, not by 'unsafe-inline'.
    response = page.request.get(SETTINGS)
    policy = response.headers["content-security-policy"]
    assert re.search(r"style-src 'self' 'nonce-[\w-]{20,}'", policy), policy
    assert "unsafe-inline" not in policy
    assert page.evaluate("Array.from(document.querySelectorAll('style')).every(s => s.nonce)")
    # A new nonce per response, and no other page gets one.
    again = page.request.get(SETTINGS).headers["content-security-policy"]
    assert again != policy
    assert "nonce" not in page.request.get("/agents/prod").headers["content-security-policy"]


def test_problems_are_marked_at_their_line_and_the_list_moves_the_cursor(
        page: Page, maintainer: None, h: Any) -> None:
    sign_in(page, path=SETTINGS)
    replace_text(page, INVALID)
    # Checked by the server as you type: marked in the text and in the gutter, at line 4.
    mark = page.locator(f"{EDITOR} .cm-lintRange-error")
    expect(mark).to_have_text("root")
    expect(page.locator(f"{EDITOR} .cm-line").nth(3)).to_contain_text("access_as: root")
    assert mark.evaluate("el => el.closest('.cm-line').textContent") == "  access_as: root"
    marker = page.locator(f"{EDITOR} .cm-gutter-lint .cm-lint-marker-error")
    expect(marker).to_have_count(1)
    line_number = page.locator(f"{EDITOR} .cm-lineNumbers .cm-gutterElement", has_text="4")
    assert abs(marker.bounding_box()["y"] - line_number.bounding_box()["y"]) < 3
    problem = page.locator("#config-check .config-problems li")
    expect(problem).to_contain_text("access_as must be one of agent, user")
    page.locator(f"{EDITOR} .cm-content").press("Control+Home")
    assert cursor(page)["line"] == 1
    page.locator("#config-check").get_by_role("link", name="4:14").click()
    assert cursor(page) == {"line": 4, "column": 14, "focused": True}
    assert config_events(h) == ["config_commit_received"]  # checking records nothing


def test_the_changes_are_shown_before_saving(page: Page, maintainer: None, app: Any) -> None:
    sign_in(page, path=SETTINGS)
    changed = IN_FORCE.replace("levels: [error]", "levels: [error, warning]")
    replace_text(page, changed)
    page.get_by_role("button", name="Save configuration").click()
    review = page.get_by_role("dialog", name="Changes to save")
    expect(review).to_be_visible()
    expect(review).to_contain_text("Version 1 (in force)")
    expect(review.locator(".cm-merge-a .cm-changedLine")).to_contain_text("levels: [error]")
    expect(review.locator(".cm-merge-b .cm-changedLine")).to_contain_text(
        "levels: [error, warning]")
    # Keep editing: nothing is sent.
    review.get_by_role("button", name="Keep editing").click()
    expect(review).to_be_hidden()
    with app.app_context():
        assert reading.in_force(agents.get("prod")).number == 1
    page.get_by_role("button", name="Save configuration").click()
    review.get_by_role("button", name="Save configuration").click()
    expect(page.get_by_role("status").filter(has_text="Configuration version 2 saved")
           ).to_be_visible()
    with app.app_context():
        assert reading.in_force(agents.get("prod")).text == changed


def test_a_refused_save_stays_on_the_page_and_records_nothing(
        page: Page, maintainer: None, h: Any, app: Any) -> None:
    sign_in(page, path=SETTINGS)
    replace_text(page, INVALID)
    expect(page.locator(f"{EDITOR} .cm-lintRange-error")).to_have_text("root")
    # Nothing is offered to save while the text has problems ...
    save = page.locator("#config-form").get_by_role("button", name="Save configuration")
    expect(save).to_be_disabled()
    # ... and a save that goes out all the same (another tab, a script) is refused.
    page.on("dialog", lambda dialog: dialog.accept())
    with page.expect_response(lambda r: r.request.method == "POST"
                              and r.url.endswith("#configuration") is False) as answer:
        page.evaluate("""() => {
            const form = document.getElementById('config-form');
            HTMLFormElement.prototype.submit.call(form);
        }""")
    assert answer.value.status == 422
    refused = page.locator("#config-problems")
    expect(refused).to_contain_text("The configuration was refused; version 1 stays in force.")
    assert page.url.split("#")[0].endswith(SETTINGS)  # a reload shows the Settings tab
    # What was typed is still there, marked where the server said, and listed once.
    expect(page.locator(f"{EDITOR} .cm-lintRange-error")).to_have_text("root")
    expect(page.locator(".config-problems")).to_have_count(1)
    page.locator(".config-problems").get_by_role("link", name="4:14").click()
    assert cursor(page)["line"] == 4
    expect(save).to_be_disabled()
    # Nothing was committed: no event, so no notification either.
    assert config_events(h) == ["config_commit_received"]
    with app.app_context():
        assert reading.in_force(agents.get("prod")).number == 1
    expect(page.locator("#notify-count")).to_be_hidden()


def test_leaving_with_unsaved_edits_asks_first(page: Page, maintainer: None) -> None:
    sign_in(page, path=SETTINGS)
    replace_text(page, IN_FORCE.replace("levels: [error]", "levels: [error, warning]"))
    asked: list[str] = []

    def stay(dialog: Any) -> None:
        asked.append(dialog.type)
        dialog.dismiss()
    page.on("dialog", stay)
    with page.expect_event("dialog"):  # reported after the click may have returned
        page.get_by_role("link", name="Activity", exact=True).click()
    expect(page).to_have_url(re.compile(re.escape(SETTINGS)))
    assert asked == ["beforeunload"]


def test_access_is_changed_in_the_configuration(page: Page, maintainer: None) -> None:
    sign_in(page, path=SETTINGS)
    summary = page.locator(".access-summary")
    expect(summary).to_contain_text("from role viewer")
    expect(page.get_by_role("button", name="Save access")).to_have_count(0)
    expect(page.locator(f"{EDITOR} .cm-content")).to_be_visible()  # the editor has loaded
    page.get_by_role("link", name="Change access in the configuration").click()
    # No `user_access` yet: today's access is written in, the cursor on it.
    expect(page.locator(f"{EDITOR} .cm-content")).to_contain_text("user_access:")
    position = cursor(page)
    assert position["focused"] and position["line"] == 6
    assert page.locator("#config-text").input_value().endswith(
        "user_access:\n  access_as: agent\n  view: {role: viewer, users: []}\n"
        "  act: {role: maintainer, users: []}\n")


def test_the_editor_follows_the_theme(page: Page, maintainer: None) -> None:
    sign_in(page, path=SETTINGS)
    expect(page.locator(EDITOR)).to_be_visible()
    dark = """() => {
        const CM = window.AgentwatchCodeMirror;
        const view = CM.EditorView.findFromDOM(document.querySelector('#config-editor .cm-editor'));
        return view.state.facet(CM.EditorView.darkTheme);
    }"""
    assert page.evaluate(dark) is False
    page.emulate_media(color_scheme="dark")
    page.wait_for_function(dark)
    page.evaluate("document.documentElement.setAttribute('data-theme', 'light')")
    page.wait_for_function(f"() => !({dark})()")


def test_without_scripts_the_form_still_saves(browser: Browser, live_server: str,
                                              maintainer: None, app: Any) -> None:
    context = browser.new_context(base_url=live_server, java_script_enabled=False)
    try:
        tab = context.new_page()
        sign_in(tab, path=SETTINGS)
        text = tab.locator("#config-text")
        expect(text).to_be_visible()
        text.fill(IN_FORCE + "  # no script\n")
        tab.get_by_role("button", name="Save configuration").click()
        expect(tab.get_by_text("Configuration version 2 saved")).to_be_visible()
    finally:
        context.close()
    with app.app_context():
        assert reading.in_force(agents.get("prod")).text.endswith("# no script\n")


def test_a_viewer_reads_the_configuration_without_editing_it(page: Page, maintainer: None,
                                                             h: Any) -> None:
    h.user("val", "viewer")
    sign_in(page, name="val", path=SETTINGS)
    content = page.locator(f"{EDITOR} .cm-content")
    expect(content).to_contain_text("namespaces: [apps]")
    assert content.get_attribute("contenteditable") == "false"
    expect(page.get_by_role("button", name="Save configuration")).to_have_count(0)
    # No live check either (it is a maintainer's call): any request would fail the test.
    page.get_by_role("link", name="See it in the configuration").click()
    expect(page.locator("#config-check")).to_be_empty()


def test_keys_and_values_are_suggested_from_the_schema(page: Page, maintainer: None) -> None:
    sign_in(page, path=SETTINGS)
    replace_text(page, "gitops:\n  kustomizations:\n    - name: web\n      ")
    page.keyboard.type("nam")
    options = page.locator(".cm-tooltip-autocomplete li")
    expect(options).to_have_text(["namespace"])  # `name` is written already
    page.wait_for_timeout(200)  # Enter accepts once the list has been seen for a moment
    page.keyboard.press("Enter")
    page.keyboard.insert_text("apps\nuser_access:\n  access_as: ")
    page.keyboard.type("u")
    expect(options).to_have_text(["user"])
    page.wait_for_timeout(200)
    page.keyboard.press("Enter")
    expect(page.locator(f"{EDITOR} .cm-content")).to_contain_text("access_as: user")
    assert page.locator("#config-text").input_value() == (
        "gitops:\n  kustomizations:\n    - name: web\n      namespace: apps\n"
        "user_access:\n  access_as: user")
