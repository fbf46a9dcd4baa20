"""Where the credentials come from: a kubeconfig file, the pod's service account, or the default.

One function so that ``analyze --pending-pods`` and ``apply`` find a cluster the same way and
fail with the same one line. A token that cannot go into an HTTP header (a newline inside, as
when two lines were pasted) is refused here, by where it came from: the HTTP library's own
error quotes the header, token included.

**Exec credential plugins** (``users[].user.exec``: ``aws eks get-token``, ``gke-gcloud-auth-
plugin``, ``kubelogin``) are run by :func:`_run_plugin`, not by the official client's
``ExecProvider`` (kubernetes 37, ``kubernetes/config/exec_provider.py``), which

* runs the plugin with no time limit: a plugin that hangs (a login waiting for a browser, an
  unreachable identity provider) hung ``migscope apply`` and ``analyze --pending-pods`` with
  no output (issue 20, item 3);
* hands the plugin our stderr and stdin when our stdout is a terminal, and when the plugin
  fails, puts its whole stderr in an exception that the loader logs at ERROR through the
  root logger: a plugin that printed its token (debug output) had it shown (item 2).

Here the plugin runs in a session of its own with stdin closed, stderr discarded (never read,
so never shown or logged: say so in the error and let the user run the command by hand) and
stdout read within the command's time limit (:data:`DEFAULT_EXEC_TIMEOUT_S` or the caller's,
the same as one API request); past it the plugin's whole process group is killed and the
error is one line naming the kubeconfig, the user, the command and the limit. The plugin is
told ``interactive: false``; one that needs a terminal (``interactiveMode: Always``) is
refused. The hook is :meth:`_Loader._load_from_exec_plugin`, the one method of the client's
``KubeConfigLoader`` that runs the plugin (at load and again when the token expires), so
everything else (merging ``KUBECONFIG`` files, relative paths, auth providers, the refresh
before an expired token is used) stays the client's. ``tests/kube/test_exec_plugin.py`` runs
real plugin scripts through it, so a client release that stops calling it fails there.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from typing import Any

from kubernetes import client, config
from kubernetes.config.dateutil import parse_rfc3339
from kubernetes.config.exec_provider import ExecProvider
from kubernetes.config.kube_config import (
    KUBE_CONFIG_DEFAULT_LOCATION,
    FileOrData,
    KubeConfigLoader,
    KubeConfigMerger,
)

from migscope.core import one_line
from migscope.kube._client import ApiError, KubeError

DEFAULT_EXEC_TIMEOUT_S = 30.0
"""How long a kubeconfig's exec plugin may take: as long as one API request.

That is :class:`~migscope.kube._client.Kube`'s default timeout, which ``apply`` uses;
``analyze --pending-pods`` passes its ``--timeout`` instead.
"""


class KubeConfigError(KubeError):
    """No usable Kubernetes configuration (the message says what was tried)."""


def _token_problem(api: client.ApiClient) -> str | None:
    """What makes a configured token unsendable (not the token itself), or None."""
    for value in (api.configuration.api_key or {}).values():
        if not isinstance(value, str):
            continue
        if "\n" in value or "\r" in value:
            return "the user's token contains a newline"
        if any(not (" " <= c <= "~") for c in value):
            return "the user's token contains a control or non-ASCII character"
    return None


def _checked(api: client.ApiClient, source: str) -> client.ApiClient:
    problem = _token_problem(api)
    if problem is not None:
        raise KubeConfigError(f"{source}: {problem}")
    return api


class _RetryNoise(logging.Filter):
    """Drops urllib3's "Retrying (Retry(total=2...)) after connection broken" warnings.

    Each migscope call that fails ends in one line of its own (issue 25: ``analyze
    --pending-pods on`` against a refused connection printed three such WARNING lines first).
    urllib3 still retries; only its running commentary goes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Retrying (")


_RETRY_NOISE = _RetryNoise()


def _quiet_retries() -> None:
    """Install :class:`_RetryNoise` on urllib3's connection pool logger (once)."""
    logger = logging.getLogger("urllib3.connectionpool")
    if _RETRY_NOISE not in logger.filters:
        logger.addFilter(_RETRY_NOISE)


def api_client(
    kubeconfig: str | None = None,
    *,
    context: str | None = None,
    exec_timeout_s: float = DEFAULT_EXEC_TIMEOUT_S,
) -> client.ApiClient:
    """A ``kubernetes.client.ApiClient``: the given kubeconfig, else in-cluster, else the default.

    Args:
        kubeconfig: The kubeconfig file (default: in-cluster, then ``KUBECONFIG`` or
            ``~/.kube/config``).
        context: The kubeconfig context (default: its current one).
        exec_timeout_s: The most an exec credential plugin may take, each time it runs (at
            load, and before a request once its token has expired); the command's request
            timeout.

    Raises:
        KubeConfigError: no usable configuration (one line saying what was tried), a token
            that cannot be sent (said without the token), an exec plugin that failed or ran
            past ``exec_timeout_s`` (naming its command, never showing its output).
    """
    _quiet_retries()
    if kubeconfig is not None:
        if not os.path.exists(kubeconfig):
            raise KubeConfigError(f"{kubeconfig}: no such kubeconfig file")
        try:
            from_file = _from_kubeconfig(kubeconfig, context, exec_timeout_s)
        except (config.ConfigException, ValueError, OSError) as exc:
            raise KubeConfigError(f"{kubeconfig}: {one_line(exc)}") from exc
        return _checked(from_file, kubeconfig)
    try:
        config.load_incluster_config()
        return _checked(client.ApiClient(), "the pod's service account")
    except config.ConfigException:
        pass
    try:
        default = _from_kubeconfig(None, context, exec_timeout_s)
    except (config.ConfigException, ValueError, OSError) as exc:
        raise KubeConfigError(
            f"no Kubernetes credentials (not in a cluster, no usable kubeconfig: {one_line(exc)})"
        ) from exc
    return _checked(default, "the default kubeconfig")


def _from_kubeconfig(path: str | None, context: str | None, timeout_s: float) -> client.ApiClient:
    """``config.new_client_from_config(path, context)``, with :class:`_Loader` as the loader.

    The same steps as the client's ``load_kube_config``: merge the files (``KUBECONFIG`` may
    name several), load the context into a fresh ``Configuration``, and persist what an auth
    provider refreshes.
    """
    # KUBECONFIG as it is now: the client's constant froze it when it was imported.
    default = os.environ.get("KUBECONFIG") or KUBE_CONFIG_DEFAULT_LOCATION
    source = path if path is not None else default
    merger = KubeConfigMerger(source)
    if merger.config is None:
        raise config.ConfigException("Invalid kube-config file. No configuration found.")
    loader = _Loader(merger, context=context, source=source, exec_timeout_s=timeout_s)
    configuration = client.Configuration()
    loader.load_and_set(configuration)
    return client.ApiClient(configuration=configuration)


class _Loader(KubeConfigLoader):
    """The client's kubeconfig loader with the exec plugin run by :func:`_run_plugin`.

    Args:
        merger: The kubeconfig file(s), read.
        context: The context to use (default: the current one).
        source: What messages call the kubeconfig.
        exec_timeout_s: The most one run of the exec plugin may take.
    """

    def __init__(
        self, merger: Any, *, context: str | None, source: str, exec_timeout_s: float
    ) -> None:
        # Named rather than super(): mypy lets typed code call the client's unannotated
        # functions (untyped_calls_exclude) only when it sees whose they are.
        KubeConfigLoader.__init__(
            self,
            config_dict=merger.config,
            active_context=context,
            config_base_path=None,
            config_persister=merger.save_changes,
        )
        self.source = source
        self.exec_timeout_s = exec_timeout_s
        self.loaded = False

    def load_and_set(self, client_configuration: client.Configuration) -> None:
        """Load the credentials into ``client_configuration``; later plugin runs are refreshes."""
        KubeConfigLoader.load_and_set(self, client_configuration)
        self.loaded = True  # from now on the plugin runs before a request: errors are ApiErrors

    def _load_from_exec_plugin(self) -> bool | None:
        """Set the token (or client certificate) from the user's exec plugin; None: no plugin.

        What the client's own method does with the plugin's answer, but a failure is an
        error (the client logged it, plugin stderr included, and went on without
        credentials): a :class:`KubeConfigError` at load, an :class:`ApiError` when the
        plugin runs again before a request, so the request fails as one that got no answer.
        """
        # The client's loader is unannotated: its state is read through Any.
        loaded: Any = self
        if "exec" not in loaded._user:
            return None
        exec_config = loaded._user["exec"]
        user = loaded._current_context["context"].safe_get("user")
        where = f"{self.source}: user {user}: exec plugin"
        error = ApiError if self.loaded else KubeConfigError
        base_path = loaded._get_base_path(loaded._cluster.path)
        provider = ExecProvider(exec_config, base_path, loaded._cluster)
        if exec_config.safe_get("interactiveMode") == "Always":
            raise error(
                f"{where} {provider.args[0]} needs a terminal (interactiveMode: Always); "
                "migscope runs plugins without one: log in first or use a non-interactive plugin"
            )
        status = _run_plugin(provider, self.exec_timeout_s, where, error)
        if "token" in status:
            self.token = f"Bearer {status['token']}"
        elif "clientCertificateData" in status and "clientKeyData" in status:
            # As the client does it: written to temporary files it removes at exit.
            for attr, key in (
                ("cert_file", "clientCertificateData"),
                ("key_file", "clientKeyData"),
            ):
                data = FileOrData(
                    status,
                    None,
                    data_key_name=key,
                    file_base_path=base_path,
                    base64_file_content=False,
                    temp_file_path=loaded._temp_file_path,
                )
                setattr(self, attr, data.as_file())
        else:
            raise error(
                f"{where} {provider.args[0]} answered neither a token nor a client certificate "
                "and key"
            )
        if "expirationTimestamp" in status:
            self.expiry = parse_rfc3339(status["expirationTimestamp"])
        return True


def _run_plugin(
    provider: Any, timeout_s: float, where: str, error: type[KubeError]
) -> dict[str, Any]:
    """Run the exec plugin ``provider`` describes; its ExecCredential's ``status``.

    Its stderr goes to ``/dev/null`` (a plugin may print its token there), stdin is closed,
    and it has ``timeout_s`` in all, in a session of its own so that a timeout kills what it
    started too (a shell's ``sleep``, a browser helper). No message quotes its output.

    Raises:
        KubeError: ``error``, one line starting with ``where``: the plugin could not start,
            failed, ran past ``timeout_s``, or answered something that is not an
            ExecCredential of the kubeconfig's ``apiVersion``.
    """
    command = provider.args[0]
    spec: dict[str, Any] = {"interactive": False}
    if provider.cluster:  # provideClusterInfo, as the client sends it
        spec["cluster"] = provider.cluster.value
        for extension in provider.cluster.value.get("extensions") or ():
            if extension.get("name") == "client.authentication.k8s.io/exec":
                spec["cluster"]["config"] = extension.get("extension")
                break
    info = {"apiVersion": provider.api_version, "kind": "ExecCredential", "spec": spec}
    env = {**provider.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
    try:
        proc = subprocess.Popen(
            provider.args,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=provider.cwd,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        raise error(f"{where} {command} cannot be started: {exc.strerror or exc}") from None
    try:
        out, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise error(
            f"{where} {command} did not answer within {timeout_s:g} s (stopped; its stderr is "
            "not shown, as it may hold a credential: run the command by hand to see why)"
        ) from None
    if proc.returncode != 0:
        how = (
            f"signal {signal.Signals(-proc.returncode).name}"
            if proc.returncode < 0 and -proc.returncode in signal.valid_signals()
            else f"exit status {proc.returncode}"
        )
        raise error(
            f"{where} {command} failed ({how}; its stderr is not shown, as it may hold a "
            "credential: run the command by hand to see why)"
        )
    try:
        answer = json.loads(out)
    except ValueError:
        answer = None
    if not isinstance(answer, dict) or not isinstance(answer.get("status"), dict):
        raise error(f"{where} {command} printed no ExecCredential with a status on stdout")
    if answer.get("apiVersion") != provider.api_version:
        raise error(
            f"{where} {command} answered apiVersion {str(answer.get('apiVersion'))[:80]!r}, "
            f"the kubeconfig asks for {provider.api_version!r}"
        )
    status: dict[str, Any] = answer["status"]
    return status


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the plugin's process group, reap the plugin, close its stdout unread.

    Not ``communicate()`` again: a child that left the group could hold stdout open forever.
    """
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
