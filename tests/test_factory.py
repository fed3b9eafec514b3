"""The app factory, configuration layers and the persistent secret key."""

from __future__ import annotations

import hashlib
from pathlib import Path

from webapp import create_app

STATIC = Path(__file__).parent.parent / "webapp" / "static" / "vendor"


def test_testing_config_is_applied(app):
    assert app.testing
    assert app.config["SCHEDULER_ENABLED"] is False


def test_defaults_then_instance_file_then_environment(app_config, tmp_path, monkeypatch):
    instance = tmp_path / "layered"
    instance.mkdir()
    (instance / "config.py").write_text("RETENTION_DAYS = 3\nDISCONNECT_AFTER_SECONDS = 120\n")
    monkeypatch.setenv("AGENTWATCH_DISCONNECT_AFTER_SECONDS", "300")
    config = {k: v for k, v in app_config.items() if k != "SECRET_KEY"}
    app = create_app({**config, "INSTANCE_PATH": str(instance)})
    assert app.config["RETENTION_DAYS"] == 3             # instance/config.py
    assert app.config["DISCONNECT_AFTER_SECONDS"] == 300  # environment wins
    assert app.config["TOKEN_TOUCH_SECONDS"] == 30       # default
    app.extensions["db_engine"].dispose()


def test_secret_key_is_generated_once_and_kept(app_config, tmp_path):
    config = {k: v for k, v in app_config.items() if k != "SECRET_KEY"}
    config["INSTANCE_PATH"] = str(tmp_path / "keys")
    first = create_app(config)
    second = create_app(config)
    assert first.config["SECRET_KEY"] == second.config["SECRET_KEY"]
    assert len(first.config["SECRET_KEY"]) == 64
    assert (tmp_path / "keys" / "secret_key").stat().st_mode & 0o077 == 0
    for app in (first, second):
        app.extensions["db_engine"].dispose()


def test_bad_integer_in_environment_is_a_clear_error(app_config, monkeypatch):
    import pytest
    monkeypatch.setenv("AGENTWATCH_RETENTION_DAYS", "a week")
    with pytest.raises(SystemExit, match="AGENTWATCH_RETENTION_DAYS must be an integer"):
        create_app(app_config)


def test_vendored_files_match_their_recorded_checksums():
    recorded = (STATIC / "VERSIONS.md").read_text()
    for line in recorded.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 4 and cells[0].endswith((".js", ".css")):
            digest = hashlib.sha256((STATIC / cells[0]).read_bytes()).hexdigest()
            assert digest == cells[3], cells[0]


def test_a_served_process_compiles_every_template_before_its_first_request(app):
    from webapp.server import compile_templates

    count = compile_templates(app)
    pages = [n for n in app.jinja_env.list_templates() if n.endswith(".html")]
    assert count == len(pages) and "cluster/page.html" in pages
    cached = {name for (_loader, name) in app.jinja_env.cache}
    assert set(pages) <= cached


def test_a_broken_template_stops_the_start_with_its_name(app, tmp_path):
    import jinja2
    import pytest

    from webapp.server import compile_templates

    (tmp_path / "broken.html").write_text("{% if %}")
    app.jinja_loader = jinja2.ChoiceLoader([app.jinja_loader, jinja2.FileSystemLoader(tmp_path)])
    app.jinja_env.loader = app.create_global_jinja_loader()
    with pytest.raises(jinja2.TemplateSyntaxError) as raised:
        compile_templates(app)
    assert raised.value.name == "broken.html"
