# One image for api, edge and pipeline (the last stage, the default target); the command picks the
# process. The `frontdoor` target is nginx with the dashboard page built in (docs/web.md).
#
# Node 24 (LTS) on Debian 13 "trixie". Local development pins uWebSockets.js to
# @trufflesuite/uws-js-unofficial (package.json), whose binaries stop at Node 20 (end of life
# 2026-04-30). The image swaps in @btc-vision/uwebsockets.js 20.57.0 instead: binaries for Node
# 20/22/24/25, built against glibc 2.38, which Debian 12 lacks and Debian 13 (2.41) has. Both expose
# the same module (`import uWS from 'uWebSockets.js'`), so the code does not know which it got.
# See docs/security.md, "Container image". Not built in CI: there is no Docker engine on our machines.
ARG NODE_IMAGE=node:24-trixie-slim

FROM ${NODE_IMAGE} AS deps
WORKDIR /app
COPY package.json package-lock.json ./
# No install scripts: nothing the image runs needs one (the test-only chdb would download a library).
RUN npm ci --no-audit --no-fund --ignore-scripts

FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY apps apps
COPY pipeline pipeline
COPY postgres postgres
COPY clickhouse clickhouse
COPY lib lib
COPY domain domain
COPY scripts scripts
COPY benchmarks benchmarks
COPY simulator simulator
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev --ignore-scripts

# The uWebSockets.js build for this Node, pinned by version and by the registry's sha512 of its
# tarball, unpacked in place of the local one. Only the binary for this platform and Node ABI is
# kept (the package holds twenty, ~120 MB), and the build fails unless it loads here.
ARG UWS_PACKAGE=@btc-vision/uwebsockets.js@20.57.0
ARG UWS_SHA512=4ae3e912348a67b3f9f0bff6ec15d7b2b1ac3302e63eea5f627cbca09b0e985678fb35fb09af7b9c13ed6779e029b7de0d9cd3ca2eeb5eb8bbe083467ab86e82
RUN set -eu; \
    mkdir /tmp/uws; \
    npm pack "$UWS_PACKAGE" --pack-destination /tmp/uws --silent; \
    tarball="$(ls /tmp/uws/*.tgz)"; \
    echo "$UWS_SHA512  $tarball" | sha512sum -c -; \
    rm -rf node_modules/uWebSockets.js; \
    mkdir node_modules/uWebSockets.js; \
    tar -xzf "$tarball" -C node_modules/uWebSockets.js --strip-components=1; \
    keep="uws_linux_$(node -p process.arch)_$(node -p process.versions.modules).node"; \
    test -f "node_modules/uWebSockets.js/$keep"; \
    find node_modules/uWebSockets.js -name 'uws_*.node' ! -name "$keep" -delete; \
    rm -rf /tmp/uws; \
    node --input-type=module -e "const { default: uWS } = await import('uWebSockets.js'); if (typeof uWS.App !== 'function') throw new Error('uWebSockets.js did not load');"

# The dashboard page: static files built by Vite (dev dependencies, hence from `deps`).
FROM deps AS web
COPY apps/web apps/web
RUN node node_modules/vite/bin/vite.js build apps/web

# The front door: nginx with its config, the shared includes and the page.
FROM nginx:1.27 AS frontdoor
COPY deploy/nginx.conf /etc/nginx/nginx.conf
COPY stack/nginx/frontdoor-logging.conf stack/nginx/frontdoor-errors.conf stack/nginx/frontdoor-web.conf /etc/nginx/
COPY --from=web /app/apps/web/dist /usr/share/nginx/dashboard

FROM ${NODE_IMAGE} AS app
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /app/package.json ./
COPY --from=build /app/node_modules node_modules
COPY --from=build /app/dist dist
# Migrations are read from the source tree at run time.
COPY postgres/migrations postgres/migrations
COPY clickhouse/migrations clickhouse/migrations
USER node
CMD ["node", "--enable-source-maps", "dist/apps/api/main.js"]
