"""The `agentwatch` command, as scripts use it."""

from __future__ import annotations

from conftest import bearer

from webapp import agents, users
from webapp.cli import main
from webapp.events import describe


def invoke(runner, *args, env=None):
    return runner.invoke(main, list(args), env=env, catch_exceptions=False)


def test_users_create_and_token(runner, app, client):
    result = invoke(runner, "users", "create", "root", "--role", "admin",
                    env={"AGENTWATCH_PASSWORD": "long enough pw"})
    assert result.exit_code == 0, result.output
    with app.app_context():
        assert users.check_password("root", "long enough pw") is not None
    token = invoke(runner, "users", "token", "root").stdout.strip().splitlines()[-1]
    assert client.get("/api/v1/agents", headers=bearer(token)).status_code == 200


def test_users_create_refuses_bad_input(runner):
    result = runner.invoke(main, ["users", "create", "root", "--role", "admin"],
                           env={"AGENTWATCH_PASSWORD": "short"})
    assert result.exit_code != 0 and "at least 8 characters" in result.output
    result = runner.invoke(main, ["users", "create", "root", "--role", "owner"],
                           env={"AGENTWATCH_PASSWORD": "long enough pw"})
    assert result.exit_code != 0 and "owner" in result.output


def test_users_delete(runner, app):
    env = {"AGENTWATCH_PASSWORD": "long enough pw"}
    assert invoke(runner, "users", "create", "root", "--role", "admin", env=env).exit_code == 0
    assert invoke(runner, "users", "create", "Carol", "--role", "viewer", env=env).exit_code == 0
    clash = runner.invoke(main, ["users", "create", "carol", "--role", "admin"], env=env)
    assert clash.exit_code != 0 and "A user named 'Carol' already exists" in clash.output
    assert invoke(runner, "users", "delete", "carol").output == "deleted viewer Carol\n"
    last = runner.invoke(main, ["users", "delete", "root"])
    assert last.exit_code != 0 and "The last admin cannot be deleted" in last.output
    gone = runner.invoke(main, ["users", "delete", "carol"])
    assert gone.exit_code != 0 and "No user named 'carol'" in gone.output
    with app.app_context():
        assert [u.name for u in users.all_users()] == ["root"]


def test_agents_create_list_and_errors(runner, app):
    assert invoke(runner, "agents", "create", "edge-1", "--kubeconfig", "/k/config",
                  "--context", "sim").exit_code == 0
    assert invoke(runner, "agents", "create", "incluster", "--in-cluster").exit_code == 0
    with app.app_context():
        agent = agents.get("edge-1")
        assert (agent.kubeconfig_path, agent.kube_context) == ("/k/config", "sim")
    listing = invoke(runner, "agents", "list").output
    assert "edge-1" in listing and "Never connected" in listing and "in-cluster" in listing
    bad = runner.invoke(main, ["agents", "create", "Edge_1"])
    assert bad.exit_code != 0 and "DNS label" in bad.output
    dup = runner.invoke(main, ["agents", "create", "edge-1"])
    assert dup.exit_code != 0 and "already exists" in dup.output


def test_tokens_create_and_revoke(runner, client, h):
    h.agent()
    result = invoke(runner, "tokens", "create", "prod", "--name", "ci")
    raw = result.stdout.strip().splitlines()[-1]
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(raw)).status_code == 204
    assert invoke(runner, "tokens", "revoke", "prod", "ci").exit_code == 0
    assert client.post("/api/v1/agent/heartbeat", headers=bearer(raw)).status_code == 401
    missing = runner.invoke(main, ["tokens", "revoke", "prod", "ci"])
    assert missing.exit_code != 0 and "no active token named 'ci'" in missing.output
    types = [e.type for e in h.events()]
    assert types.count("token_created") == 1 and types.count("token_revoked") == 1
    assert "Token ci created by the command line" in [describe(e) for e in h.events()]


def test_jobs_run(runner, h, client, clock):
    raw = h.agent_with_token()
    client.post("/api/v1/agent/heartbeat", headers=bearer(raw))
    clock.advance(minutes=20)
    assert invoke(runner, "jobs", "run", "disconnects").output.strip() == "disconnects: 1"
    assert invoke(runner, "jobs", "run", "prune").output.strip() == "prune: 0"
    bad = runner.invoke(main, ["jobs", "run", "nope"])
    assert bad.exit_code != 0 and "nope" in bad.output


def test_demo_seeds_a_usable_first_screen(runner, app, client):
    output = invoke(runner, "demo").output
    assert "sign in as admin / " in output
    password = output.split("sign in as admin / ")[1].split()[0]
    with app.app_context():
        assert users.check_password("admin", password) is not None
        assert agents.get("demo-agent")
    again = invoke(runner, "demo").output
    assert "already present" in again and password in again
