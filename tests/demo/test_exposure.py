"""The demo warns when it binds a non-loopback address, and contacts only the operator's endpoints or loopback
addresses for URLs typed in the UI unless started with --allow-any-endpoint (issue 15, item 9)."""

from __future__ import annotations

import pytest

from venus_utils.demo.runs import DemoSettings, InputError, check_endpoint, is_loopback, normalize_base_url


@pytest.mark.parametrize(
    "host,loopback",
    [
        ("127.0.0.1", True),
        ("127.1.2.3", True),
        ("localhost", True),
        ("::1", True),
        ("[::1]", True),
        ("0.0.0.0", False),
        ("", False),
        ("::", False),
        ("192.168.1.10", False),
        ("demo.example.org", False),
        ("localhost.example.org", False),
        ("0x7f000001", False),
    ],
)
def test_is_loopback(host, loopback):
    assert is_loopback(host) is loopback


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:6001",
        "http://localhost:8000/v1/",
        "http://[::1]:9/v1",
        "https://gpu-box.lan:6001/v1/chat/completions",
        "http://GPU-BOX.lan:6001/v1",
    ],
)
def test_check_endpoint_allows_loopback_and_the_configured_endpoint(url):
    assert check_endpoint(url, ["http://gpu-box.lan:6001/v1", "https://gpu-box.lan:6001"]).endswith("/v1")


@pytest.mark.parametrize(
    "url",
    [
        "http://10.0.0.5:8000/v1",
        "http://169.254.169.254/latest",
        "http://gpu-box.lan:6002/v1",
        "http://127.0.0.1@10.0.0.5:8000/v1",
        "http://localhost.attacker.example/v1",
        "https://gpu-box.lan:6001/admin",
        "http://0x7f000001:8000/v1",
    ],
)
def test_check_endpoint_refuses_other_urls(url):
    with pytest.raises(InputError, match="--allow-any-endpoint"):
        check_endpoint(url, ["http://gpu-box.lan:6001/v1"])
    assert check_endpoint(url, allow_any=True) == normalize_base_url(url)  # the operator's opt-in


# ---- the Gradio server's handlers (no browser) --------------------------------------------------------------
@pytest.fixture
def requests_made(monkeypatch):
    """Every ``httpx.get`` the server makes, answered with an OpenAI-style model list."""
    httpx = pytest.importorskip("httpx")
    pytest.importorskip("gradio")
    made = []

    def fake_get(url, **kwargs):
        made.append(url)
        return httpx.Response(200, json={"data": [{"id": "model"}]}, request=httpx.Request("GET", url))

    monkeypatch.setattr(httpx, "get", fake_get)
    return made


def test_check_service_refuses_urls_outside_the_configured_endpoints(requests_made):
    from venus_utils.demo.app import DemoServer

    server = DemoServer(
        run_fn=lambda *a: {}, defaults=DemoSettings(model="endpoint", endpoint="http://gpu-box.lan:6001")
    )
    refused = server.check_service("http://10.0.0.5:8000/v1", "")
    assert refused.startswith("❌") and "not an endpoint this demo may contact" in refused
    assert "--allow-any-endpoint" in refused and requests_made == []
    assert server.check_service("http://gpu-box.lan:6001/v1/", "").startswith("✅")  # the configured one
    assert server.check_service("http://127.0.0.1:6001", "").startswith("✅")  # loopback
    assert requests_made == ["http://gpu-box.lan:6001/v1/models", "http://127.0.0.1:6001/v1/models"]
    opted_in = DemoServer(run_fn=lambda *a: {}, allow_any_endpoint=True)
    assert opted_in.check_service("http://10.0.0.5:8000/v1", "").startswith("✅")
    assert requests_made[-1] == "http://10.0.0.5:8000/v1/models"


def _run_form(**changes) -> dict:
    form = dict(
        model="checkpoint",
        checkpoint="",
        endpoint="",
        endpoint_model="model",
        endpoint_key="",
        tools="local",
        world_dir="",
        serper_key="",
        jina_key="",
        summary_base="",
        summary_key="",
        summary_model="",
        max_steps=3,
    )
    return {**form, **changes}


def test_a_run_on_a_refused_endpoint_does_not_start(requests_made):
    from venus_utils.demo.app import DemoServer

    calls = []
    server = DemoServer(run_fn=lambda *a: calls.append(a) or {})
    base = _run_form(model="endpoint", endpoint="http://10.0.0.5:8000/v1")
    for changes in ({}, dict(model="tiny", tools="web", summary_base="http://10.0.0.6:8000/v1")):
        updates = list(server.start("Where?", **{**base, **changes}))
        assert len(updates) == 1 and "not an endpoint this demo may contact" in updates[0][2]
    assert calls == [] and server.runs == {} and requests_made == []


def _main(monkeypatch, tmp_path, *args) -> dict:
    """``python -m venus_utils.demo ARGS`` with Gradio's launch replaced (nothing is bound)."""
    pytest.importorskip("gradio")
    from venus_utils.demo import __main__ as cli
    from venus_utils.demo.app import DemoServer

    seen: dict = {}

    class FakeBlocks:
        def launch(self, **kwargs):
            seen["launch"] = kwargs
            return None, f"http://{kwargs['server_name']}:{kwargs['server_port']}/", None

    def build(self):
        seen["server"] = self
        return FakeBlocks()

    monkeypatch.setattr(DemoServer, "build", build)
    cli.main(["--run-dir", str(tmp_path), "--model", "http://127.0.0.1:6001/v1", *args])
    return seen


def test_binding_a_public_address_prints_a_warning(monkeypatch, tmp_path, capsys):
    seen = _main(monkeypatch, tmp_path, "--host", "0.0.0.0")
    err = capsys.readouterr().err
    assert seen["launch"]["server_name"] == "0.0.0.0"
    assert "WARNING" in err and "'0.0.0.0'" in err and "no authentication" in err
    assert "--allow-any-endpoint" not in err and seen["server"].allow_any_endpoint is False


def test_the_any_endpoint_opt_in_is_passed_and_warned_about(monkeypatch, tmp_path, capsys):
    seen = _main(monkeypatch, tmp_path, "--host", "192.168.1.10", "--allow-any-endpoint")
    err = capsys.readouterr().err
    assert seen["server"].allow_any_endpoint is True and seen["server"].endpoints == ["http://127.0.0.1:6001/v1"]
    assert "WARNING" in err and "--allow-any-endpoint" in err


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "::1"])
def test_binding_loopback_prints_no_warning(monkeypatch, tmp_path, capsys, host):
    seen = _main(monkeypatch, tmp_path, "--host", host)
    assert seen["launch"]["server_name"] == host and "WARNING" not in capsys.readouterr().err


def test_an_exposed_demo_refuses_loopback_urls_but_keeps_its_configured_endpoint():
    """Bound beyond this machine, the demo must not let visitors probe its host's local services."""
    with pytest.raises(InputError, match="loopback addresses are refused too"):
        check_endpoint("http://127.0.0.1:8000/v1", ["http://127.0.0.1:6001/v1"], allow_loopback=False)
    assert check_endpoint("http://127.0.0.1:6001/v1", ["http://127.0.0.1:6001/v1"], allow_loopback=False)


# ---------------------------------------------------------------------------------------------------------------
# issue 22, item 3: an exposed demo reads only its own folders and never echoes credentials


def test_an_exposed_demo_refuses_folders_outside_its_run_folders(tmp_path):
    from venus_utils.demo.app import DemoServer

    run = tmp_path / "runs" / "smoke"
    (run / "00_setup" / "world").mkdir(parents=True)
    (run / "03_sft_unsloth" / "model").mkdir(parents=True)
    extra = tmp_path / "models"
    (extra / "mine").mkdir(parents=True)
    outside = tmp_path / "secret"
    outside.mkdir()
    (run / "link").symlink_to(outside)
    defaults = DemoSettings(world_dir=str(run / "00_setup" / "world"), extra={"run_dir": str(run)})
    calls = []
    exposed = DemoServer(
        run_fn=lambda *a: calls.append(a) or {}, defaults=defaults, exposed=True, allow_folders=[str(extra)]
    )
    world = str(run / "00_setup" / "world")
    for checkpoint, world_dir in [
        ("/etc", world),
        (str(outside), world),
        (str(run / "link"), world),  # a symbolic link out of the run folder
        (str(run / ".." / ".." / "secret"), world),
        (str(run / "03_sft_unsloth" / "model"), "/etc"),
    ]:
        updates = list(exposed.start("Where?", **_run_form(checkpoint=checkpoint, world_dir=world_dir)))
        status = updates[-1][2]
        assert "must be inside the folders this demo serves" in status and "--allow-folder" in status
        assert str(tmp_path) not in status  # the server's paths are not disclosed either
    assert calls == [] and exposed.runs == {}
    _, note = exposed.model_defaults("checkpoint", "/etc")
    assert "must be inside the folders this demo serves" in note
    for checkpoint in (str(run / "03_sft_unsloth" / "model"), str(extra / "mine")):  # its own folders are fine
        exposed.check_folders(DemoSettings(model="checkpoint", checkpoint=checkpoint, world_dir=world))
    local = DemoServer(run_fn=lambda *a: {}, defaults=defaults)  # on loopback: the operator's own machine
    local.check_folders(DemoSettings(model="checkpoint", checkpoint=str(outside), world_dir="/etc"))


def test_the_allow_folder_option_reaches_the_server(monkeypatch, tmp_path, capsys):
    seen = _main(monkeypatch, tmp_path, "--host", "0.0.0.0", "--allow-folder", str(tmp_path / "extra"))
    assert (tmp_path / "extra").resolve() in seen["server"].folders
    assert tmp_path.resolve() in seen["server"].folders  # the run folder
    assert _main(monkeypatch, tmp_path)["server"].folders is None  # loopback: not limited


def test_credentials_in_a_typed_endpoint_are_not_echoed(requests_made):
    from venus_utils.demo.app import DemoServer

    exposed = DemoServer(run_fn=lambda *a: {}, exposed=True)
    shown = exposed.check_service("http://me:hunter22@10.0.0.5:8000/v1?api-key=SECRETKEY", "typed-key-1234")
    assert shown.startswith("❌") and "hunter22" not in shown and "SECRETKEY" not in shown
    updates = list(
        exposed.start(
            "Where?", **_run_form(model="endpoint", endpoint="http://me:hunter22@10.0.0.5:8000/v1", endpoint_key="k")
        )
    )
    assert "hunter22" not in updates[-1][2] and requests_made == []
    local = DemoServer(run_fn=lambda *a: {}, allow_any_endpoint=True)
    shown = local.check_service("http://me:hunter22@10.0.0.5:8000/v1", "typed-key-1234")
    assert shown.startswith("✅") and "hunter22" not in shown and "typed-key-1234" not in shown
