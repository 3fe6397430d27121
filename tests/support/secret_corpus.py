"""Fake secrets in realistic lines, and benign text that must come through scrubbing unchanged.

``SECRETS`` holds one ``SecretSample`` per fake secret: the shape it has, its value, and a line it
stands in (an env assignment, JSON, YAML, TOML, a log line, a curl command, a URL, a key file).
``BENIGN`` holds text that looks a little like secrets and is none: commit hashes, UUIDs,
digests, base64 test data, URLs without credentials, prose about passwords, code that refers to
a secret without holding it. ``contexts`` gives the places a sample's text can reach a scrubber
in: as it is, inside a JSON Session log line, and inside multi-line output.

Every value is assembled at import time from a prefix and characters ``fake`` computes, so this
file holds no literal that push protection or a secret scanner would flag.
"""

from __future__ import annotations

import json
import string
from dataclasses import dataclass

ALNUM = string.ascii_letters + string.digits
LOWER_ALNUM = string.ascii_lowercase + string.digits
UPPER_ALNUM = string.ascii_uppercase + string.digits
HEX = string.digits + "abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "-_"
LETTERS = string.ascii_letters
BECH32 = "QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L"


@dataclass(frozen=True)
class SecretSample:
    """A fake secret of one shape, and a realistic line it stands in."""

    shape: str
    value: str
    text: str


def fake(alphabet: str, length: int, seed: int) -> str:
    """``length`` characters of ``alphabet`` that look random and are the same on every run."""
    step = 7 + 2 * seed
    return "".join(alphabet[(seed + i * step + i * i * 3) % len(alphabet)] for i in range(length))


def pieces(value: str, size: int = 8) -> set[str]:
    """Every ``size``-character substring of ``value``: what must not survive scrubbing."""
    return {value[i : i + size] for i in range(len(value) - size + 1)}


def _pem(label: str, body_seed: int, newline: str = "\n") -> str:
    lines = [fake(B64, 64, body_seed + i) for i in range(4)] + [fake(B64, 20, body_seed) + "=="]
    begin, end = "-----BEGIN " + label + "-----", "-----END " + label + "-----"
    return newline.join([begin, *lines, end])


def _samples() -> tuple[SecretSample, ...]:
    s: list[SecretSample] = []

    def add(shape: str, value: str, text: str) -> None:
        # The value is in the text, and nothing else in the text looks like a piece of it.
        rest = text.replace(value, "\0")
        assert value in text, shape
        assert not any(piece in rest for piece in pieces(value)), shape
        s.append(SecretSample(shape, value, text))

    v = "gh" + "p_" + fake(ALNUM, 36, 1)
    add("GitHub classic token", v, f"git push https://x-access-token:{v}@github.com/o/r.git HEAD")
    v = "gh" + "o_" + fake(ALNUM, 36, 2)
    add("GitHub OAuth token", v, f'{{"access_token": "{v}", "token_type": "bearer"}}')
    v = "gh" + "s_" + fake(ALNUM, 36, 3)
    add("GitHub installation token", v, f"INFO using installation token {v} for o/r")
    v = "github" + "_pat_" + fake(ALNUM, 22, 4) + "_" + fake(ALNUM, 59, 5)
    add("GitHub fine-grained token", v, f"export GH_TOKEN={v}")
    v = "sk-" + "ant-api03-" + fake(URLSAFE, 93, 6) + "AA"
    add("Anthropic API key", v, f"ANTHROPIC_API_KEY={v}")
    v = "sk-" + "proj-" + fake(URLSAFE, 120, 7)
    add("OpenAI project key", v, f'client = OpenAI(api_key="{v}")')
    v = "sk-" + fake(ALNUM, 20, 8) + "T3Blbk" + "FJ" + fake(ALNUM, 20, 9)
    add("OpenAI legacy key", v, f'curl https://api.example.com/v1 -H "Authorization: Bearer {v}"')
    v = "AK" + "IA" + fake(UPPER_ALNUM, 16, 10)
    add("AWS access key id", v, f"aws_access_key_id = {v}")
    v = fake(B64, 40, 11)
    add("AWS secret access key", v, f"aws_secret_access_key = {v}")
    v = fake(B64, 40, 12)
    add("AWS secret access key (JSON)", v, f'"SecretAccessKey": "{v}",')
    v = "IQoJ" + "b3JpZ2luX2Vj" + fake(B64, 300, 13) + "="
    add("AWS session token", v, f"AWS_SESSION_TOKEN={v}")
    v = "FwoG" + "ZXIvYXdzE" + fake(B64, 280, 14)
    add("AWS session token (STS)", v, f'        "SessionToken": "{v}",')
    v = "xo" + "xb-" + fake(string.digits, 12, 15) + "-" + fake(string.digits, 13, 16) + "-"
    v += fake(ALNUM, 24, 17)
    add("Slack bot token", v, f"SLACK_BOT_TOKEN={v}")
    v = "xo" + "xp-" + fake(string.digits, 12, 18) + "-" + fake(ALNUM, 32, 19)
    add("Slack user token", v, f"slack: using token {v}")
    v = "T" + fake(UPPER_ALNUM, 8, 20) + "/B" + fake(UPPER_ALNUM, 10, 21) + "/"
    v += fake(ALNUM, 24, 22)
    add("Slack webhook", v, f"curl -X POST -d @msg.json https://hooks.slack.com/services/{v}")
    v = "sk" + "_live_" + fake(ALNUM, 99, 23)
    add("Stripe secret key", v, f"STRIPE_SECRET_KEY={v}")
    v = "rk" + "_live_" + fake(ALNUM, 99, 24)
    add("Stripe restricted key", v, f'stripe.api_key = "{v}"')
    v = "wh" + "sec_" + fake(ALNUM, 32, 25)
    add("Stripe webhook secret", v, f"endpoint secret {v} loaded")
    v = "EA" + "AA" + fake(URLSAFE, 60, 26)
    add("Square access token", v, f"square_access_token: {v}")
    v = "sq0" + "csp-" + fake(URLSAFE, 43, 27)
    add("Square OAuth secret", v, f"SQUARE_OAUTH_SECRET='{v}'")
    v = "access_token$" + "production$" + fake(LOWER_ALNUM, 16, 28) + "$" + fake(HEX, 32, 29)
    add("Braintree access token", v, f"braintree: gateway configured with {v}")
    v = "S" + "K" + fake(HEX, 32, 30)
    add("Twilio API key", v, f"twilio api:core:messages:list --api-key {v}")
    v = "A" + "C" + fake(HEX, 32, 31)
    add("Twilio account SID", v, f"TWILIO_ACCOUNT_SID={v}")
    v = fake(HEX, 32, 32)
    add("Twilio auth token", v, f"TWILIO_AUTH_TOKEN={v}")
    v = "S" + "G." + fake(URLSAFE, 22, 33) + "." + fake(URLSAFE, 43, 34)
    add("SendGrid API key", v, f"SENDGRID_API_KEY='{v}'")
    v = "key" + "-" + fake(HEX, 32, 35)
    add("Mailgun API key", v, f"curl -s --user 'api:{v}' https://mail.example.com/v3/x/messages")
    v = fake(HEX, 32, 36) + "-us" + "21"
    add("Mailchimp API key", v, f'{{"apikey": "{v}", "list": "weekly"}}')
    v = "np" + "m_" + fake(ALNUM, 36, 37)
    add("npm token", v, f"//npm.example.com/:_authToken={v}")
    v = "pypi" + "-AgEIcHlwaS5" + fake(URLSAFE, 150, 38)
    add("PyPI token", v, f"password = {v}")
    v = "gl" + "pat-" + fake(URLSAFE, 20, 39)
    add(
        "GitLab personal access token",
        v,
        f"git clone https://oauth2:{v}@gitlab.example.com/g/p.git",
    )
    v = "gl" + "dt-" + fake(URLSAFE, 20, 40)
    add("GitLab deploy token", v, f"GITLAB_DEPLOY_TOKEN: {v}")
    v = "gl" + "rt-" + fake(URLSAFE, 27, 41)
    add("GitLab runner token", v, f"gitlab-runner register --url https://gl.example --token {v}")
    v = "dop" + "_v1_" + fake(HEX, 64, 42)
    add("DigitalOcean token", v, f"doctl auth init --access-token {v}")
    v = "HR" + "KU-" + fake(URLSAFE, 60, 43)
    add("Heroku API key", v, f"heroku: authenticated with {v}")
    v = "-".join(fake(HEX, n, 44 + n) for n in (8, 4, 4, 4, 12))
    add("Heroku legacy API key", v, f"HEROKU_API_KEY={v}")
    v = "AI" + "za" + fake(URLSAFE, 35, 45)
    add("Google API key", v, f'<script src="https://maps.example.com/js?key={v}&callback=init">')
    v = "GOC" + "SPX-" + fake(URLSAFE, 28, 46)
    add("Google OAuth client secret", v, f'"client_secret": "{v}",')
    v = "ya" + "29." + fake(URLSAFE, 120, 47)
    add("Google OAuth access token", v, f"gcloud: access token {v} expires in 3599s")
    v = _pem("PRIVATE KEY", 48, newline="\\n")  # as the key file holds it, escaped
    add("GCP service account private key", v, f'  "private_key": "{v}\\n",')
    v = _pem("OPENSSH PRIVATE KEY", 53)
    add("OpenSSH private key", v, f"$ cat ~/.ssh/id_ed25519\n{v}")
    v = _pem("RSA PRIVATE KEY", 58)
    add("RSA private key", v, v)
    v = _pem("EC PRIVATE KEY", 63)
    add("EC private key", v, f"key.pem:\n{v}\n")
    v = _pem("PGP PRIVATE KEY BLOCK", 68)
    add("PGP private key block", v, f"gpg --export-secret-keys --armor\n{v}")
    v = "hf" + "_" + fake(LETTERS, 34, 73)
    add("Hugging Face token", v, f"huggingface-cli login --token {v}")
    v = "da" + "pi" + fake(HEX, 32, 74)
    add("Databricks token", v, f"DATABRICKS_TOKEN={v}")
    for seed, prefix in enumerate(("shpat_", "shpss_", "shpca_", "shppa_"), 75):
        v = "sh" + prefix[2:] + fake(HEX, 32, seed)
        add(f"Shopify token ({prefix})", v, f"X-Shopify-Access-Token: {v}")
    v = "ATA" + "TT3xFfGF0" + fake(URLSAFE, 170, 79) + "=" + fake("0123456789ABCDEF", 8, 80)
    add("Atlassian API token", v, f"JIRA_API_TOKEN={v}")
    v = "lin" + "_api_" + fake(ALNUM, 40, 81)
    add("Linear API key", v, f'linear = LinearClient(api_key="{v}")')
    v = "sec" + "ret_" + fake(ALNUM, 43, 82)
    add("Notion integration token", v, f"NOTION_TOKEN={v}")
    v = "nt" + "n_" + fake(string.digits, 11, 83) + fake(ALNUM, 35, 84)
    add("Notion token", v, f'headers = {{"Authorization": "Bearer {v}"}}')
    v = "dp" + ".pt." + fake(ALNUM, 43, 85)
    add("Doppler token", v, f"doppler configure set token {v}")
    v = "hv" + "s." + fake(URLSAFE, 90, 86)
    add("Vault token", v, f"VAULT_TOKEN={v} vault kv get secret/app")
    v = "pu" + "l-" + fake(HEX, 40, 87)
    add("Pulumi access token", v, f"pulumi login: using token {v}")
    v = "PM" + "AK-" + fake(HEX, 24, 88) + "-" + fake(HEX, 34, 89)
    add("Postman API key", v, f"curl -H 'X-Api-Key: {v}' https://api.example.com/collections")
    v = "gl" + "c_" + fake(B64, 80, 90) + "=="
    add("Grafana cloud token", v, f"grafana_cloud_token = {v}")
    v = "gl" + "sa_" + fake(ALNUM, 32, 91) + "_" + fake(HEX, 8, 92)
    add("Grafana service account token", v, f"GF_TOKEN: {v}")
    v = "NR" + "AK-" + fake(UPPER_ALNUM, 27, 93)
    add("New Relic user key", v, f"newrelic: key {v} accepted")
    v = fake(HEX, 32, 94)
    add("Sentry DSN", v, f"SENTRY_DSN=https://{v}@o450123.ingest.example.com/4504")
    v = "sntry" + "s_eyJ" + fake(B64, 120, 95) + "_" + fake(URLSAFE, 43, 96)
    add("Sentry org auth token", v, f"sentry-cli --auth-token {v} releases list")
    v = "AGE-SECRET" + "-KEY-1" + fake(BECH32, 58, 97)
    add("age secret key", v, f"# created: 2026-11-29\n# public key: age1qyqs\n{v}")
    v = "ey" + "JhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9." + "ey" + "J" + fake(URLSAFE, 80, 98) + "."
    v += fake(URLSAFE, 43, 99)
    add("JSON web token", v, f"Cookie: session={v}; Path=/; HttpOnly")
    v = fake(URLSAFE, 68, 100)
    add("Discord webhook", v, f"POST https://discord.com/api/webhooks/123456789012345678/{v}")
    v = fake(B64, 86, 101) + "=="
    add(
        "Azure storage account key",
        v,
        f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={v};EndpointSuffix=x.net",
    )
    v = fake(ALNUM, 20, 102) + "%2B" + fake(ALNUM, 20, 103) + "%3D"
    add(
        "Azure SAS signature",
        v,
        f"https://acct.blob.example.net/c/b.txt?sv=2022-11-02&sp=r&sig={v}",
    )
    v = fake(ALNUM, 3, 104) + "8Q" + "~" + fake(ALNUM + "_-", 34, 105)
    add("Azure AD client secret", v, f"AZURE_CLIENT_SECRET={v}")
    v = fake(HEX, 32, 106)
    add("Datadog API key", v, f"DD_API_KEY={v}")
    v = fake(HEX, 40, 107)
    add("Datadog application key", v, f'datadog_app_key: "{v}"')
    v = "dckr" + "_pat_" + fake(URLSAFE, 27, 108)
    add("Docker Hub token", v, f"echo {v} | docker login -u bot --password-stdin")
    v = fake(LOWER_ALNUM, 14, 109) + ".atlas" + "v1." + fake(URLSAFE, 67, 110)
    add("Terraform Cloud token", v, f'credentials "app.example.io" {{ token = "{v}" }}')
    v = "sb" + "p_" + fake(HEX, 40, 111)
    add("Supabase token", v, f"supabase login --token {v}")
    v = "Sup3r" + fake(ALNUM, 10, 112)
    add("password in a postgres URL", v, f"DATABASE_URL=postgres://app:{v}@db.internal:5432/app")
    v = "rootpw-" + fake(ALNUM, 9, 113)
    add("password in a mysql URL", v, f"mysql://root:{v}@127.0.0.1:3306/shop")
    v = "r3d1s-" + fake(ALNUM, 10, 114)
    add("password in a redis URL", v, f"connecting to redis://:{v}@cache:6379/0")
    v = "Xk9#" + fake(ALNUM, 8, 115) + "!v"
    add("password in an ADO connection string", v, f"Server=tcp:db,1433;User ID=app;Password={v};")
    v = "S3cure-" + fake(ALNUM, 10, 116) + "!"
    add("DB_PASSWORD assignment", v, f"DB_PASSWORD={v}")
    v = fake(ALNUM + "@#%^+=", 50, 117)
    add("SECRET_KEY assignment", v, f"export DJANGO_SECRET_KEY='{v}'")
    v = fake(ALNUM, 40, 118)
    add("*_SECRET assignment", v, f"APP_SECRET={v}")
    v = fake(ALNUM, 32, 119)
    add("*_TOKEN assignment", v, f"SERVICE_TOKEN={v} ./run.sh")
    v = fake(HEX, 32, 120)
    add("client_secret in YAML", v, f"  client_secret: {v}")
    v = fake(ALNUM, 40, 121)
    add("api_key in JSON", v, f'{{"name": "prod", "api_key": "{v}"}}')
    v = fake(ALNUM, 36, 122)
    add("api_key in TOML", v, f'api_key = "{v}"')
    v = "Pa55-" + fake(ALNUM, 12, 123)
    add("password in YAML", v, f'    password: "{v}"')
    v = fake(B64, 36, 124)
    add("Basic authorization header", v, f"Authorization: Basic {v}")
    v = fake(ALNUM, 40, 125)
    add("Bearer authorization header", v, f'curl -H "Authorization: Bearer {v}" https://x.example')
    v = "Tr0ub4dor-" + fake(ALNUM, 6, 126)
    add("password in curl -u", v, f"curl -u deploy:{v} https://ci.example.com/job/build")
    v = "n3tRc-" + fake(ALNUM, 12, 127)
    add("password in .netrc", v, f"machine api.example.com login bot password {v}")
    v = fake(ALNUM, 24, 128) + "9"
    add("token flag", v, f"gh-helper --token {v} --repo o/r")
    v = fake(ALNUM, 30, 129)
    add("private_key_passphrase assignment", v, f"PRIVATE_KEY_PASSPHRASE={v}")
    return tuple(s)


SECRETS: tuple[SecretSample, ...] = _samples()

_SHA1 = fake(HEX, 40, 200)
_SHA256 = fake(HEX, 64, 201)
BENIGN: tuple[str, ...] = (
    f"commit {_SHA1}",
    f"Merge {_SHA1[:12]} into main; HEAD is now at {_SHA1[:7]}",
    f"sha256:{_SHA256}",
    f"images.example.com/o/app@sha256:{_SHA256}",
    f"{_SHA256}  dist/app.tar.gz",
    "session 25c03292-1c61-4edb-98c3-868642a6004e started",
    '{"session_id":"01a228f1-67cb-7693-abe2-57d90b33f56b","type":"thread.started"}',
    'assert base64.b64encode(b"hello world") == b"aGVsbG8gd29ybGQ="',
    'FIXTURE = "SGVsbG8sIHdvcmxkIQ=="  # base64 test data',
    "data: " + fake(B64, 76, 202),
    "https://github.com/owner/repo/pull/42",
    "http://localhost:8080/api/v1/items?page=2&per_page=50",
    "git@github.com:owner/repo.git",
    "https://user@example.com/o/r.git",
    "postgresql://localhost:5432/app",
    "Set DB_PASSWORD in your environment before running the tests.",
    "password: see the vault",
    "The password must be at least 12 characters long.",
    "password = getpass()",
    'token = os.environ["GITHUB_TOKEN"]',
    'api_key = os.getenv("OPENAI_API_KEY")',
    "secret = secrets.token_hex(32)",
    "DB_PASSWORD=${DB_PASSWORD}",
    "export GITHUB_TOKEN=$GH_TOKEN",
    '"password": "<your-password>"',
    "token: ${{ secrets.GITHUB_TOKEN }}",
    "client_secret: changeme",
    "API_KEY=xxxxxxxxxxxxxxxx",
    "postgres://app:${DB_PASSWORD}@db:5432/app",
    '"usage": {"input_tokens": 1200, "cache_read_input_tokens": 800, "output_tokens": 40}',
    "max_tokens = 4096",
    "PWD=/srv/app",
    "OLDPWD=/srv",
    "passwd: files systemd",
    "def login(user: str, password: str) -> Token:",
    "tests/test_auth.py::test_token_refresh PASSED",
    "secretName: db-credentials",
    "Authorization: Bearer ${TOKEN}",
    'curl -H "Authorization: token $GITHUB_TOKEN" https://api.example.com/user',
    "Use a bearer token for authentication.",
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI" + fake(B64, 43, 203) + " dev@example.com",
    "-----BEGIN PUBLIC KEY-----",
    "-----BEGIN CERTIFICATE-----",
    "see the risk-assessment-document-for-2026 and the task-scheduler-configuration",
    "docker run -u 1000:1000 app",
    "pip install huggingface_hub hf_transfer",
    "token_type: bearer\nexpires_in: 3600",
    "key: value",
    'cache-key: deps-${{ hashFiles("poetry.lock") }}',
    "Author: Dev <dev@example.com>",
    "if token == expected_token:",
    "headers = {'Authorization': f'Bearer {token}'}",
)


def contexts(sample: SecretSample) -> tuple[str, ...]:
    """Where the sample's text may meet a scrubber: as it is, inside a JSON Session log line (a
    tool's output after a ``\\n``), and inside multi-line output."""
    return (
        sample.text,
        json.dumps({"type": "tool_result", "content": "$ ./deploy.sh\n" + sample.text}),
        f"$ ./deploy.sh\nstep 1 of 3\n{sample.text}\nstep 2 of 3\ndone\n",
    )


def traces(text: str) -> list[str]:
    """The shapes of the corpus secrets an 8-character piece of which is in ``text``, leaving
    out pieces that scrubbed text keeps by right (``access_token`` is a key's name, not a
    secret)."""
    return [
        s.shape
        for s in SECRETS
        if any(piece in text and piece not in _KEPT for piece in pieces(s.value))
    ]


def _kept() -> str:
    from thirdshift.scrub import Scrubber

    return Scrubber()("\n".join(sample.text for sample in SECRETS))


_KEPT = _kept()
