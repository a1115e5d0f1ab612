"""Where a webhook may go (labelq/hooknet.py): public addresses only unless the deployment
allows more, checked when the request is made and connected to as checked (a hook's URL is
an operator token's choice; the worker sits inside the deployment's network)."""

from __future__ import annotations

import ipaddress
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from labelq.errors import ConfigError
from labelq.hooknet import parse_networks, post, refusal, resolve
from labelq.record.settings import load_settings


@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "loopback"), ("127.8.9.10", "loopback"), ("::1", "loopback"),
    ("169.254.169.254", "link-local"),  # a cloud's metadata service
    ("fe80::1", "link-local"),
    ("10.1.2.3", "private"), ("172.16.0.1", "private"), ("192.168.1.1", "private"),
    ("fd00::5", "private"), ("0.0.0.0", "private"),
    ("100.64.0.1", "non-public"),  # carrier-grade NAT
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped: judged as its IPv4 address
    ("::ffff:10.0.0.1", "private"),
    ("224.0.0.1", "multicast"), ("ff02::1", "multicast"),
])
def test_addresses_that_are_not_public_are_refused(address, kind):
    why = refusal(ipaddress.ip_address(address))
    assert why is not None and kind in why


@pytest.mark.parametrize(("address", "kind"), [
    # IPv6 addresses that carry an IPv4 address to a gateway or tunnel, which delivers to
    # it: Python's is_global calls each of these public, whatever the IPv4 address inside
    ("64:ff9b::7f00:1", "loopback"),  # NAT64 (RFC 6052) of 127.0.0.1
    ("64:ff9b::a9fe:a9fe", "link-local"),  # NAT64 of the metadata service
    ("64:ff9b::a00:5", "private"),  # NAT64 of 10.0.0.5: an IPv6-only subnet reaches it
    ("2002:a00:5::1", "private"),  # 6to4 of 10.0.0.5
    ("2002:7f00:1::", "loopback"),
    ("::ffff:0:a00:5", "private"),  # IPv4-translated (SIIT)
    ("::7f00:1", "loopback"),  # IPv4-compatible (deprecated)
    ("64:ff9b:1::a00:5", "NAT64"),  # the local-use NAT64 prefix (RFC 8215): any IPv4 inside
])
def test_an_ipv4_address_inside_an_ipv6_one_is_judged_as_that_ipv4_address(address, kind):
    why = refusal(ipaddress.ip_address(address))
    assert why is not None and kind in why


@pytest.mark.parametrize("address", ["64:ff9b::808:808", "2002:808:808::1"])
def test_a_public_ipv4_address_inside_an_ipv6_one_passes(address):
    # (an IPv6-only network reaches public IPv4 receivers through NAT64: not refused)
    assert refusal(ipaddress.ip_address(address)) is None


def test_an_allowed_network_judges_the_ipv4_address_inside_an_ipv6_one():
    allowed = parse_networks("10.20.0.0/16")
    assert refusal(ipaddress.ip_address("64:ff9b::a14:506"), allowed) is None  # 10.20.5.6
    assert refusal(ipaddress.ip_address("64:ff9b::a15:1"), allowed) is not None  # 10.21.0.1


@pytest.mark.parametrize("address", ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111",
                                     "::ffff:8.8.8.8"])
def test_public_addresses_pass(address):
    assert refusal(ipaddress.ip_address(address)) is None


def test_an_allowed_network_lets_its_addresses_through_and_no_others():
    allowed = parse_networks("10.20.0.0/16, 127.0.0.1")
    assert refusal(ipaddress.ip_address("10.20.5.6"), allowed) is None
    assert refusal(ipaddress.ip_address("127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("::ffff:127.0.0.1"), allowed) is None
    assert refusal(ipaddress.ip_address("10.21.0.1"), allowed) is not None
    assert refusal(ipaddress.ip_address("127.0.0.2"), allowed) is not None
    assert refusal(ipaddress.ip_address("169.254.169.254"), allowed) is not None


def test_the_setting_is_checked_and_names_the_bad_entry():
    s = load_settings({"LABELQ_HOOK_ALLOW_NETWORKS": "10.0.0.0/8,::1"})
    assert [str(n) for n in s.hook_networks] == ["10.0.0.0/8", "::1/128"]
    assert load_settings({}).hook_networks == ()
    with pytest.raises(ConfigError) as err:
        load_settings({"LABELQ_HOOK_ALLOW_NETWORKS": "10.0.0.0/8,intranet"})
    assert err.value.variable == "LABELQ_HOOK_ALLOW_NETWORKS" and "'intranet'" in str(err.value)


@pytest.mark.parametrize("host", ["::ffff:127.0.0.1", "64:ff9b::7f00:1", "10.0.0.5"])
def test_the_setting_a_refusal_names_lets_that_address_through(host):
    # Given a refused address
    with pytest.raises(PermissionError) as err:
        resolve(host, 80)
    # When the deployment sets what the refusal says
    hint = re.search(r"LABELQ_HOOK_ALLOW_NETWORKS=(\S+)", str(err.value))
    assert hint is not None, err.value
    # Then that address passes
    assert resolve(host, 80, parse_networks(hint.group(1))) == [host]


def test_a_name_is_judged_by_every_address_it_resolves_to():
    # (``localhost`` resolves to loopback on any machine, and to nothing public)
    with pytest.raises(PermissionError) as err:
        resolve("localhost", 80)
    assert "loopback" in str(err.value) and "LABELQ_HOOK_ALLOW_NETWORKS=" in str(err.value)
    got = resolve("localhost", 80, parse_networks("127.0.0.0/8,::1"))
    assert got and all(ipaddress.ip_address(a).is_loopback for a in got)


class _Receiver:
    def __init__(self) -> None:
        got = self.got = []

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                got.append((self.path, self.headers["Host"],
                            self.rfile.read(int(self.headers["Content-Length"]))))
                self.send_response(302)  # an answer, not somewhere else to go
                self.send_header("Location", "http://169.254.169.254/")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def test_a_delivery_goes_to_the_address_checked_with_the_urls_host_and_no_redirect():
    rx = _Receiver()
    try:
        url = f"http://localhost:{rx.port}/in?x=1"
        # refused before any connection while loopback is not allowed
        with pytest.raises(PermissionError):
            post(url, b"{}", {"Content-Type": "application/json"}, 2.0)
        assert rx.got == []
        # allowed: the request reaches it, with the URL's host in Host and its path
        status = post(url, b'{"a":1}', {"Content-Type": "application/json"}, 2.0,
                      parse_networks("127.0.0.0/8,::1"))  # (localhost may be ::1 first)
        assert status == 302  # the redirect is the answer: not followed
        assert rx.got == [("/in?x=1", f"localhost:{rx.port}", b'{"a":1}')]
    finally:
        rx.server.shutdown()


def test_a_receiver_that_trickles_its_answer_is_cut_at_twice_the_timeout():
    # Given a receiver that sends its answer a byte every 0.2 s (never idle for a timeout)
    import socket
    import time

    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]

    def trickle() -> None:
        conn, _ = srv.accept()
        conn.recv(65536)
        try:
            for byte in b"HTTP/1.1 200 OK\r\nX-Padding: " + b"a" * 200:
                conn.sendall(bytes([byte]))
                time.sleep(0.2)
        except OSError:
            pass  # (the client hung up)
        finally:
            conn.close()
    threading.Thread(target=trickle, daemon=True).start()
    # When a delivery with a 1 s timeout is made to it
    start = time.monotonic()
    with pytest.raises(TimeoutError) as err:
        post(f"http://127.0.0.1:{port}/in", b"{}", {}, 1.0, parse_networks("127.0.0.1"))
    took = time.monotonic() - start
    srv.close()
    # Then it ends at twice the timeout, not when the receiver is done (40 s)
    assert 1.9 < took < 5.0, took
    assert "too slowly" in str(err.value)
