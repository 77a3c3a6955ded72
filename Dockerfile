# toolport: the HTTP tool server, built with tsc and run as the unprivileged `node` user.
#
#   docker build -t toolport .
#   docker run --rm -p 127.0.0.1:8080:8080 -v "$PWD:/workspace" toolport
#
# The default base is the Active LTS line of Node.js (26); 22 and 24 work too. BASE_IMAGE lets
# machines without a registry build from a local image of a chosen line (see
# ../shared/container/README.md); every stage uses it so all of them share one Node version.
ARG BASE_IMAGE=node:26-bookworm-slim

# --- base: the chosen Node.js, able to start ---------------------------------------------------
# Node 26's official Linux binary links libatomic; a base image that lacks it (a minimal Debian
# with the binary copied in) gets it here. Installs nothing where node already starts.
FROM ${BASE_IMAGE} AS base
RUN node --version >/dev/null 2>&1 || { apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends libatomic1 \
 && apt-get clean && rm -rf /var/lib/apt/lists/*; }

# --- build: all dependencies, compile TypeScript to dist/ and bundle the server ------------------
FROM base AS build
WORKDIR /app
# Manifests first: the npm ci layer is reused until the lockfile changes.
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# npm run build bundles what dist/server.js loads (an entry and its chunks), with these scripts.
COPY scripts/bundle.ts scripts/bundle-options.ts ./scripts/
RUN npm run build

# --- deps: production dependencies only -------------------------------------------------------
# A stage of its own so the runtime image never holds dev dependencies or the npm cache.
# No production dependency has an install script (only esbuild, a dev one), so skip them all.
FROM base AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

# --- runtime ----------------------------------------------------------------------------------
FROM base AS runtime
# ripgrep backs the Grep tool and bash the Bash tool; bubblewrap is its sandbox where the runtime
# lets it make namespaces, and perl-base (already in every Debian image) runs the reaper, which
# confines each command with Landlock and seccomp where bubblewrap cannot run and kills what a
# command leaves behind, and the helper that holds the file tools' locks. git is for the commands
# Bash runs (an agent's first tool after the shell). tini is PID 1: it
# forwards SIGTERM to node (which shuts down gracefully and exits 0) and reaps the orphans of
# commands the tools spawn, which node as PID 1 would leave as zombies. No ca-certificates: node
# carries its own CA store.
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends bash bubblewrap git perl-base ripgrep tini \
 && apt-get clean \
 && rm -rf /var/lib/apt/lists/*

WORKDIR /app
# App files stay owned by root: the server can read but not rewrite its own code.
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY openapi ./openapi
COPY --from=build /app/dist ./dist
# The Perl helpers (the reaper, the lock helper) sit beside the bundles and beside their modules:
# an image that lacks one, or whose Perl cannot compile it, fails here, not at the first call.
RUN for helper in dist/main/reaper.pl dist/main/flock.pl dist/os/proc/reaper.pl dist/os/fs/flock.pl; do \
      perl -c "$helper" || exit 1; \
    done

# The only directory the file tools may touch; mount a volume over it to serve real files.
RUN install -d -o node -g node /workspace

# The Bash sandbox: auto uses bubblewrap when a trial run at start-up works, and otherwise
# Landlock (ABI 6, Linux 6.12 or later) with seccomp, which the reaper applies to each command
# before it runs: that needs no namespace, no capability and no package beyond perl-base, so it
# works under a runtime's defaults, Docker's default seccomp profile with every capability dropped,
# and a restricted Kubernetes pod. The start-up log names the mechanism in use and why
# (docs/security.md). `-e TOOLPORT_BASH_SANDBOX=true` refuses to start without one of the two.
ENV NODE_ENV=production \
    HOST=0.0.0.0 \
    PORT=8080 \
    TOOLPORT_WORKSPACE=/workspace \
    TOOLPORT_BASH_SANDBOX=auto
# uid:gid of the base image's `node` user; numeric so runAsNonRoot checks can verify it.
USER 1000:1000
WORKDIR /workspace
EXPOSE 8080

# curl is not in the image; node's own fetch checks the endpoint.
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]

ENTRYPOINT ["/usr/bin/tini", "--"]
# Exec form, no npm: SIGTERM reaches node itself.
CMD ["node", "/app/dist/server.js"]
