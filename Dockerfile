# Node 24 is the LTS line with the longest support left (to April 2028); 22
# ends in April 2027. The full version keeps builds repeatable; bump it
# deliberately.

# All dependencies, installed once from the lockfile: the build compiles with
# them and the runtime's set is pruned from them.
FROM node:24.21.0-bookworm-slim AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund

# Compile TypeScript (and the locale files beside it) to dist/.
FROM deps AS build
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# What the compiled service needs at run time and nothing else. tsx stays in
# package.json's dependencies so that `npm install --omit=dev && npm start`
# works from a checkout, so it is taken out of the manifest here and pruned
# with what only it pulls in (esbuild). TypeScript is a dev dependency, but
# i18next names it as an optional peer, which makes npm keep it through
# --omit=dev: it goes by hand. So do type declarations that a runtime
# package declares as a dependency (protobufjs, under gRPC, names
# @types/node): types are never read at run time.
FROM deps AS runtime-deps
RUN npm pkg delete dependencies.tsx \
  && npm prune --omit=dev --no-audit --no-fund \
  && rm -rf node_modules/typescript node_modules/.bin/tsc node_modules/.bin/tsserver node_modules/@types

FROM node:24.21.0-bookworm-slim
ENV NODE_ENV=production HOST=0.0.0.0 PORT=3000
WORKDIR /app
# Owned by root and so read-only for the service's user; only data/ is its own.
COPY --from=runtime-deps /app/node_modules ./node_modules
COPY package.json ./
COPY --from=build /app/dist ./dist
COPY sql ./sql
COPY console ./console
# The .proto files the gRPC server (GRPC_PORT) loads at start.
COPY proto ./proto
COPY model.conf model.decisions ./
RUN mkdir -p /app/data && chown node:node /app/data
USER node
# The embedded store (when DATABASE_URL is unset or pglite://…), its lock and the generated JWT key.
VOLUME /app/data
EXPOSE 3000
# The server drains in-flight requests on SIGTERM within SHUTDOWN_TIMEOUT_MS.
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||3000)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
CMD ["node", "dist/http/server.js"]
