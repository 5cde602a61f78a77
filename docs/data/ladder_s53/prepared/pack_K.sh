#!/usr/bin/env bash
# .gpuK: .gpuI (session 52's build_I.sh) and .gpuJ (build_J.sh) in one archive whose xz dictionary spans every binary
# (the binaries share most of their bytes: 4.8 MB against 38 MB packed apart, under the device's 64 MiB carry).
set -euo pipefail
cd "$(dirname "$0")/../../../.."
rm -rf /tmp/pk && mkdir -p /tmp/pk .gpuK && tar xJf .gpuI/binI.tar.xz -C /tmp/pk && tar xJf .gpuJ/binJ.tar.xz -C /tmp/pk
tar cf - -C /tmp/pk bin | xz -T2 --lzma2=preset=6,dict=256MiB > .gpuK/binIJ.tar.xz
grep -q '^.gpuK/' .git/info/exclude 2>/dev/null || echo '.gpuK/' >> .git/info/exclude
