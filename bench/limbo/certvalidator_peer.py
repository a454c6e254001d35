"""certvalidator peer, after limbo's harness/certvalidator/main.py.

ValidationContext with the trusted certs as roots, the validation time, no
fetching, md2/md5/sha1 weak; validate_tls(peer name) then validate_usage with
the testcase's key usages / EKUs. Unlike limbo (which skips CRL cases) the
testcase's CRLs are handed to the context. Any certvalidator error is FAILURE;
other exceptions are counted as harness errors (still FAILURE, as in limbo).
"""
from asn1crypto import pem
from certvalidator import CertificateValidator, ValidationContext, errors
from certvalidator import __version__
from certvalidator.validate import validate_usage

from pyrunner import run, when

# limbo's key-usage / EKU spellings -> certvalidator's
USAGE = {"digitalSignature": "digital_signature", "contentCommitment": "non_repudiation",
         "keyEncipherment": "key_encipherment", "dataEncipherment": "data_encipherment",
         "keyAgreement": "key_agreement", "keyCertSign": "key_cert_sign", "cRLSign": "crl_sign",
         "encipherOnly": "encipher_only", "decipherOnly": "decipher_only",
         "anyExtendedKeyUsage": "any_extended_key_usage", "serverAuth": "server_auth",
         "clientAuth": "client_auth", "codeSigning": "code_signing",
         "emailProtection": "email_protection", "timeStamping": "time_stamping",
         "OCSPSigning": "ocsp_signing"}
REJECTIONS = (errors.PathError, errors.ValidationError, errors.CRLValidationError,
              errors.OCSPValidationError, errors.SoftFailError)


def evaluate(tc):
    context = ValidationContext(
        trust_roots=[c.encode() for c in tc["trusted_certs"]],
        moment=when(tc),
        allow_fetching=False,
        crls=[pem.unarmor(c.encode())[2] for c in tc["crls"]] or None,  # DER
        weak_hash_algos={"md2", "md5", "sha1"},
    )
    validator = CertificateValidator(
        end_entity_cert=tc["peer_certificate"].encode(),
        intermediate_certs=[c.encode() for c in tc["untrusted_intermediates"]],
        validation_context=context,
    )
    name = tc["expected_peer_name"]
    try:
        path = validator.validate_tls(hostname=name["value"] if name else None)
        ekus = {USAGE[e] for e in tc["extended_key_usage"]}
        validate_usage(context, list(path)[-1], key_usage={USAGE[k] for k in tc["key_usage"]},
                       extended_key_usage=ekus, extended_optional=bool(ekus))
        return True
    except REJECTIONS:
        return False


if __name__ == "__main__":
    run(f"certvalidator {__version__}", evaluate)
