# One image for api, edge and pipeline; the command picks the process.
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY apps apps
COPY pipeline pipeline
COPY postgres postgres
COPY clickhouse clickhouse
COPY lib lib
COPY domain domain
COPY scripts scripts
COPY benchmarks benchmarks
RUN npx tsc -p tsconfig.build.json && npm prune --omit=dev

FROM node:20-bookworm-slim
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
