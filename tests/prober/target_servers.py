"""Real HTTP(S) servers for the prober's tests, each on its own loopback address (127.0.0.x is a
distinct host to the prober), answering after a delay with a status the test sets; TLS servers
present a certificate of a test CA (made with ``cryptography``), valid or already expired."""

from __future__ import annotations

import dataclasses
import datetime
import http.server
import ipaddress
import ssl
import threading
import time
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


@dataclasses.dataclass
class CertificateAuthority:
    """A certificate authority of the test run: ``ca_file`` is what the prober is told to trust."""

    key: ec.EllipticCurvePrivateKey
    cert: x509.Certificate
    directory: Path

    @property
    def ca_file(self) -> Path:
        return self.directory / "ca.pem"

    @classmethod
    def create(cls, directory: Path) -> CertificateAuthority:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "conveyor prober test CA")])
        now = datetime.datetime.now(datetime.UTC)
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(key, hashes.SHA256())
        )
        ca = cls(key, cert, directory)
        ca.ca_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return ca

    def leaf(self, address: str, *, expired: bool = False) -> ssl.SSLContext:
        """A server context for ``address`` whose certificate is valid for 90 days, or ran out
        yesterday."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = datetime.datetime.now(datetime.UTC)
        start, end = (
            (now - datetime.timedelta(days=30), now - datetime.timedelta(days=1))
            if expired
            else (
                now - datetime.timedelta(days=1),
                now + datetime.timedelta(days=90),
            )
        )
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, address)]))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start)
            .not_valid_after(end)
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(address))]), critical=False)
            .sign(self.key, hashes.SHA256())
        )
        stem = self.directory / f"{address}{'-expired' if expired else ''}"
        cert_file, key_file = stem.with_suffix(".crt"), stem.with_suffix(".key")
        cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        key_file.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert_file, key_file)
        return context


class TargetServer:
    """A threaded HTTP(S) server on ``address``: every GET waits ``delay`` seconds, then answers
    ``status``; ``requests`` counts them and ``in_flight_peak`` is the most served at once."""

    def __init__(
        self, address: str, *, delay: float = 0.0, status: int = 200, tls: ssl.SSLContext | None = None
    ) -> None:
        self.address = address
        self.delay = delay
        self.status = status
        self.requests = 0
        self.in_flight = 0
        self.in_flight_peak = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with outer._lock:
                    outer.requests += 1
                    outer.in_flight += 1
                    outer.in_flight_peak = max(outer.in_flight_peak, outer.in_flight)
                try:
                    time.sleep(outer.delay)
                    body = b"ok\n" if outer.status < 400 else b"failing\n"
                    self.send_response(outer.status)
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the prober gave up first (its timeout): what the slow server is for
                finally:
                    with outer._lock:
                        outer.in_flight -= 1

            def log_message(self, format: str, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer((address, 0), Handler)
        self._server.daemon_threads = True
        if tls is not None:
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True)
        self.port = self._server.server_address[1]
        self.url = f"{'https' if tls else 'http'}://{address}:{self.port}/health"
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
