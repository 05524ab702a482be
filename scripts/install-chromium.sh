#!/usr/bin/env bash
# The browser the report tests open report.html in: Debian's chromium package, installed when missing.
# Without root or apt the tests that need it are skipped, saying so.
set -u
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (Debian package) for the report tests" >&2
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 \
        || { apt-get update -q >/dev/null 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1; } \
        || echo "could not install chromium: the report's browser tests will be skipped" >&2
else
    echo "chromium is missing and cannot be installed here (needs root and apt): the report's browser tests will be skipped" >&2
fi
exit 0
