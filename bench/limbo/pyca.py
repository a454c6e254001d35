"""pyca/cryptography peer, after limbo's harness/pyca-cryptography/main.py.

Trusted certs form the Store, the peer name becomes DNSName/IPAddress for a
server verifier (serverAuth), validation_time sets the time (None = now).
This API takes no CRLs. Rejections (VerificationError, or ValueError for a
certificate it cannot parse or a name build_server_verifier refuses) are FAILURE.
"""
import ipaddress

from cryptography import __version__, x509
from cryptography.x509.verification import PolicyBuilder, Store, VerificationError

from pyrunner import run, when


def load(pems):
    return [x509.load_pem_x509_certificate(p.encode()) for p in pems]


def evaluate(tc):
    name = tc["expected_peer_name"]  # None raises below: a harness error
    try:
        if name["kind"] == "IP":
            subject = x509.IPAddress(ipaddress.ip_address(name["value"]))
        else:
            subject = x509.DNSName(name["value"])
        builder = PolicyBuilder().store(Store(load(tc["trusted_certs"])))
        if when(tc):
            builder = builder.time(when(tc))
        verifier = builder.build_server_verifier(subject)
        verifier.verify(load([tc["peer_certificate"]])[0], load(tc["untrusted_intermediates"]))
        return True
    except (VerificationError, ValueError):  # ValueError: unparsable cert or refused name
        return False


if __name__ == "__main__":
    run(f"cryptography {__version__}", evaluate)
