// The shipped table of date-bounded distrust (DistrustTable): each row a vendor's announced
// decision, its roots by subject and SubjectPublicKeyInfo SHA-256 (computed with openssl from
// Debian's ca-certificates, the Apple root snapshot and NSS's certdata.txt). Each row's `source` is
// the announcement; `note` says what is assumed where the announcement is silent.
enum DateBoundedDistrustSnapshot {
    static let json = #"""
{
  "version": "2026-11-28",
  "entries": [
    {
      "vendor": "chrome",
      "operator": "Entrust (incl. AffirmTrust brand)",
      "distrust_after": "2024-11-11T23:59:59Z",
      "dated_by": "earliest-sct",
      "source": "https://security.googleblog.com/2024/06/sustaining-digital-certificate-security.html",
      "roots": [
        {
          "subject": "CN=Entrust Root Certification Authority - EC1,OU=(c) 2012 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "/qK31kX7pz11PB7Jp4cMQOH3sMVh6Se5hb9xGGbjbyI="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - G2,OU=(c) 2009 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "du6FkDdMcVQ3u8prumAo6t3i3G27uMP2EOhR8R0at/U="
        },
        {
          "subject": "CN=Entrust.net Certification Authority (2048),OU=(c) 1999 Entrust.net Limited,OU=www.entrust.net/CPS_2048 incorp. by ref. (limits liab.),O=Entrust.net",
          "spki_sha256": "HqPF5D7WbC2imDpCpKebHpBnhs6fG1hiFBmgBGOofTg="
        },
        {
          "subject": "CN=Entrust Root Certification Authority,OU=(c) 2006 Entrust\\, Inc.,OU=www.entrust.net/CPS is incorporated by reference,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "bb+uANN7nNc/j7R95lkXrwDg3d9C286sIMF8AnXuIJU="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - G4,OU=(c) 2015 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "NtfHnz0Img/3mXLZCSPepcp2tMy698J1HLFS6UlPUtA="
        },
        {
          "subject": "CN=AffirmTrust Commercial,O=AffirmTrust,C=US",
          "spki_sha256": "bEZLmlsjOl6HTadlwm8EUBDS3c/0V5TwtMfkqvpQFJU="
        },
        {
          "subject": "CN=AffirmTrust Networking,O=AffirmTrust,C=US",
          "spki_sha256": "lAcq0/WPcPkwmOWl9sBMlscQvYSdgxhJGa6Q64kK5AA="
        },
        {
          "subject": "CN=AffirmTrust Premium,O=AffirmTrust,C=US",
          "spki_sha256": "x/Q7TPW3FWgpT4IrU3YmBfbd0Vyt7Oc56eLDy6YenWc="
        },
        {
          "subject": "CN=AffirmTrust Premium ECC,O=AffirmTrust,C=US",
          "spki_sha256": "MhmwkRT/SVo+tusAwu/qs0ACrl8KVsdnnqCHo/oDfk8="
        }
      ]
    },
    {
      "vendor": "chrome",
      "operator": "Chunghwa Telecom",
      "distrust_after": "2025-07-31T23:59:59Z",
      "dated_by": "earliest-sct",
      "source": "https://security.googleblog.com/2025/05/sustaining-digital-certificate-security-chrome-root-store-changes.html",
      "roots": [
        {
          "subject": "OU=ePKI Root Certification Authority,O=Chunghwa Telecom Co.\\, Ltd.,C=TW",
          "spki_sha256": "YlVMFwBVQ7I3IV8EJo3NL9HEcCQK08hmDiWuLFljD1U="
        },
        {
          "subject": "CN=HiPKI Root CA - G1,O=Chunghwa Telecom Co.\\, Ltd.,C=TW",
          "spki_sha256": "ecqvU0fm5KlMjniphJb8dAIPgJ7eE/Ig+rYQTI3tMp8="
        }
      ]
    },
    {
      "vendor": "chrome",
      "operator": "NetLock",
      "distrust_after": "2025-07-31T23:59:59Z",
      "dated_by": "earliest-sct",
      "source": "https://security.googleblog.com/2025/05/sustaining-digital-certificate-security-chrome-root-store-changes.html",
      "roots": [
        {
          "subject": "CN=NetLock Arany (Class Gold) Főtanúsítvány,OU=Tanúsítványkiadók (Certification Services),O=NetLock Kft.,L=Budapest,C=HU",
          "spki_sha256": "9Iut199qBmkNCuMTc7EoVfje2xRRfzYqMTEBzJjMazU="
        }
      ]
    },
    {
      "vendor": "mozilla",
      "operator": "Entrust (incl. AffirmTrust brand)",
      "distrust_after": "2024-11-30T23:59:59Z",
      "dated_by": "not-before",
      "source": "https://groups.google.com/a/mozilla.org/g/dev-security-policy/c/jCvkhBjg9Yw",
      "roots": [
        {
          "subject": "CN=Entrust Root Certification Authority,OU=(c) 2006 Entrust\\, Inc.,OU=www.entrust.net/CPS is incorporated by reference,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "bb+uANN7nNc/j7R95lkXrwDg3d9C286sIMF8AnXuIJU="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - G2,OU=(c) 2009 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "du6FkDdMcVQ3u8prumAo6t3i3G27uMP2EOhR8R0at/U="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - EC1,OU=(c) 2012 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "/qK31kX7pz11PB7Jp4cMQOH3sMVh6Se5hb9xGGbjbyI="
        },
        {
          "subject": "CN=Entrust.net Certification Authority (2048),OU=(c) 1999 Entrust.net Limited,OU=www.entrust.net/CPS_2048 incorp. by ref. (limits liab.),O=Entrust.net",
          "spki_sha256": "HqPF5D7WbC2imDpCpKebHpBnhs6fG1hiFBmgBGOofTg="
        },
        {
          "subject": "CN=AffirmTrust Commercial,O=AffirmTrust,C=US",
          "spki_sha256": "bEZLmlsjOl6HTadlwm8EUBDS3c/0V5TwtMfkqvpQFJU="
        },
        {
          "subject": "CN=AffirmTrust Networking,O=AffirmTrust,C=US",
          "spki_sha256": "lAcq0/WPcPkwmOWl9sBMlscQvYSdgxhJGa6Q64kK5AA="
        },
        {
          "subject": "CN=AffirmTrust Premium,O=AffirmTrust,C=US",
          "spki_sha256": "x/Q7TPW3FWgpT4IrU3YmBfbd0Vyt7Oc56eLDy6YenWc="
        },
        {
          "subject": "CN=AffirmTrust Premium ECC,O=AffirmTrust,C=US",
          "spki_sha256": "MhmwkRT/SVo+tusAwu/qs0ACrl8KVsdnnqCHo/oDfk8="
        }
      ]
    },
    {
      "vendor": "mozilla",
      "operator": "e-commerce monitoring GmbH (GLOBALTRUST)",
      "distrust_after": "2024-06-30T00:00:00Z",
      "dated_by": "not-before",
      "source": "https://www.mail-archive.com/dev-security-policy@mozilla.org/msg01617.html",
      "roots": [
        {
          "subject": "CN=GLOBALTRUST 2020,O=e-commerce monitoring GmbH,C=AT",
          "spki_sha256": "/uivkpF1aH9GOKP8mD247NDl4qg+c38/t3tMIvy6wKY="
        }
      ]
    },
    {
      "vendor": "mozilla",
      "operator": "Chunghwa Telecom (ePKI root only)",
      "distrust_after": "2025-04-15T23:59:59Z",
      "dated_by": "not-before",
      "source": "https://bugzilla.mozilla.org/show_bug.cgi?id=1974299",
      "roots": [
        {
          "subject": "OU=ePKI Root Certification Authority,O=Chunghwa Telecom Co.\\, Ltd.,C=TW",
          "spki_sha256": "YlVMFwBVQ7I3IV8EJo3NL9HEcCQK08hmDiWuLFljD1U="
        }
      ]
    },
    {
      "vendor": "mozilla",
      "operator": "Izenpe",
      "distrust_after": "2026-04-15T23:59:59Z",
      "dated_by": "not-before",
      "source": "https://bugzilla.mozilla.org/show_bug.cgi?id=2017322",
      "roots": [
        {
          "subject": "CN=Izenpe.com,O=IZENPE S.A.,C=ES",
          "spki_sha256": "lSwgOcAkPrUV3XPYP8NkMYSHT+sIYqmDdzHtm0dC4Xo="
        }
      ]
    },
    {
      "vendor": "apple",
      "operator": "Entrust (incl. AffirmTrust brand)",
      "distrust_after": "2024-11-15T23:59:59Z",
      "dated_by": "not-before",
      "source": "https://support.apple.com/en-us/121668",
      "roots": [
        {
          "subject": "CN=Entrust Root Certification Authority - G4,OU=(c) 2015 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "NtfHnz0Img/3mXLZCSPepcp2tMy698J1HLFS6UlPUtA="
        },
        {
          "subject": "CN=Entrust Root Certification Authority,OU=(c) 2006 Entrust\\, Inc.,OU=www.entrust.net/CPS is incorporated by reference,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "bb+uANN7nNc/j7R95lkXrwDg3d9C286sIMF8AnXuIJU="
        },
        {
          "subject": "CN=Entrust.net Certification Authority (2048),OU=(c) 1999 Entrust.net Limited,OU=www.entrust.net/CPS_2048 incorp. by ref. (limits liab.),O=Entrust.net",
          "spki_sha256": "HqPF5D7WbC2imDpCpKebHpBnhs6fG1hiFBmgBGOofTg="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - G2,OU=(c) 2009 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "du6FkDdMcVQ3u8prumAo6t3i3G27uMP2EOhR8R0at/U="
        },
        {
          "subject": "CN=Entrust Root Certification Authority - EC1,OU=(c) 2012 Entrust\\, Inc. - for authorized use only,OU=See www.entrust.net/legal-terms,O=Entrust\\, Inc.,C=US",
          "spki_sha256": "/qK31kX7pz11PB7Jp4cMQOH3sMVh6Se5hb9xGGbjbyI="
        },
        {
          "subject": "CN=AffirmTrust Commercial,O=AffirmTrust,C=US",
          "spki_sha256": "bEZLmlsjOl6HTadlwm8EUBDS3c/0V5TwtMfkqvpQFJU="
        },
        {
          "subject": "CN=AffirmTrust Networking,O=AffirmTrust,C=US",
          "spki_sha256": "lAcq0/WPcPkwmOWl9sBMlscQvYSdgxhJGa6Q64kK5AA="
        },
        {
          "subject": "CN=AffirmTrust Premium,O=AffirmTrust,C=US",
          "spki_sha256": "x/Q7TPW3FWgpT4IrU3YmBfbd0Vyt7Oc56eLDy6YenWc="
        },
        {
          "subject": "CN=AffirmTrust Premium ECC,O=AffirmTrust,C=US",
          "spki_sha256": "MhmwkRT/SVo+tusAwu/qs0ACrl8KVsdnnqCHo/oDfk8="
        }
      ],
      "note": "partly confirmed: Apple gives a date only ('issued after'); the time of day (23:59:59 UTC) and dating by notBefore are assumed; AffirmTrust Premium and Premium ECC are assumed"
    },
    {
      "vendor": "apple",
      "operator": "AC Camerfirma",
      "distrust_after": "2024-11-15T23:59:59Z",
      "dated_by": "not-before",
      "source": "https://support.apple.com/en-us/121668",
      "roots": [
        {
          "subject": "CN=Chambers of Commerce Root - 2008,O=AC Camerfirma S.A.,serialNumber=A82743287,L=Madrid (see current address at www.camerfirma.com/address),C=EU",
          "spki_sha256": "ztQ5AqtftXtEIyLcDhcqT7VfcXi4CPlOeApv1sxr2Bg="
        },
        {
          "subject": "CN=Global Chambersign Root - 2008,O=AC Camerfirma S.A.,serialNumber=A82743287,L=Madrid (see current address at www.camerfirma.com/address),C=EU",
          "spki_sha256": "knobhWIoBXbQSMUDIa2kPYcD0tlSGhjCi4xGzGquTv0="
        }
      ],
      "note": "partly confirmed: Apple gives a date only ('issued after'); the time of day (23:59:59 UTC) and dating by notBefore are assumed"
    }
  ]
}
"""#
}
