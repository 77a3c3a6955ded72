import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { IService } from 'kubernetes-models/v1/Service';
import { CONFIG_VARIABLES, loadConfig, type Config } from '#src/config/config.js';
import { BASE_DIR, buildBase, parseManifests, type Manifest, type Resource } from './kustomize.js';
import { restrictedViolations } from './pod-security.js';
import { kindOf, KINDS, unknownFields, validateSchema } from './schemas.js';
import { skipWithout } from '../support/require.js';

// How long the server gives itself past TOOLPORT_SHUTDOWN_GRACE_MS before it exits anyway
// (FORCED_EXIT_AFTER_GRACE_MS in src/main/serve.ts).
const FORCED_EXIT_AFTER_GRACE_S = 5;

let resourceFiles: string[];
let resources: Resource[];

before(async () => {
  ({ resourceFiles, resources } = await buildBase());
});

/** The one resource of a kind, typed by its kubernetes-models interface (the schema test validates it). */
function only<T>(kind: string): T {
  const found = resources.filter((r) => r.manifest.kind === kind);
  assert.equal(found.length, 1, `the base holds ${found.length} ${kind} resources, expected one`);
  return found[0]!.manifest as unknown as T;
}

const deployment = (): IDeployment => only<IDeployment>('Deployment');
const podSpec = (): IPodSpec => deployment().spec!.template.spec!;
const podLabels = (): Record<string, string> => deployment().spec!.template.metadata!.labels!;
const configMap = (): IConfigMap => only<IConfigMap>('ConfigMap');
const config = (): Config => loadConfig(configMap().data!, '/');

function server(): IContainer {
  const container = podSpec().containers.find((c) => c.name === 'toolport');
  assert.ok(container, 'the Deployment has a container named toolport');
  return container;
}

/** The container port a Service, probe or policy names, by number or by name. */
function containerPort(port: number | string | undefined): number | undefined {
  return typeof port === 'number' ? port : server().ports?.find((p) => p.name === port)?.containerPort;
}

/** True when a selector's labels all appear among the pod's labels. */
const selects = (matchLabels: Record<string, string> | undefined): boolean =>
  matchLabels !== undefined && Object.keys(matchLabels).length > 0 && Object.entries(matchLabels).every(([k, v]) => podLabels()[k] === v);

function mountOf(volumeName: string): { mountPath: string; readOnly?: boolean } {
  const mount = server().volumeMounts?.find((m) => m.name === volumeName);
  assert.ok(mount, `volume ${volumeName} is mounted`);
  return mount;
}

const within = (file: string, dir: string): boolean => file.startsWith(dir.endsWith('/') ? dir : `${dir}/`);

describe('the kustomize base in deploy/kubernetes', () => {
  test('lists every manifest file beside it, and every resource is of a kind with a schema', async () => {
    const files = (await readdir(BASE_DIR)).filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml');
    assert.deepEqual([...resourceFiles].sort(), files.sort());
    for (const { file, manifest } of resources) assert.ok(KINDS.has(kindOf(manifest)), `${file}: ${kindOf(manifest)}`);
  });

  test('every resource validates against the Kubernetes schema of its kind', () => {
    for (const { file, manifest } of resources) {
      assert.doesNotThrow(() => validateSchema(manifest), `${file}: ${manifest.kind} ${manifest.metadata.name}`);
    }
  });

  test('no resource has a field that the Kubernetes API does not know', () => {
    assert.deepEqual(unknownFields(resources.map((r) => r.manifest)), []);
  });

  test('the field check catches a misspelt field', () => {
    const misspelt = structuredClone(deployment()) as unknown as Manifest & { spec: { template: { spec: { containers: Record<string, unknown>[] } } } };
    misspelt.spec.template.spec.containers[0]!.readinesProbe = { httpGet: { path: '/readyz', port: 8080 } };
    const problems = unknownFields([misspelt]);
    assert.equal(problems.length, 1);
    assert.match(problems[0]!, /^Deployment: .*'readinesProbe' does not exist/);
  });

  test('kubectl kustomize builds the same resources as the test does', async (t) => {
    let output: string;
    try {
      ({ stdout: output } = await promisify(execFile)('kubectl', ['kustomize', BASE_DIR], { timeout: 60_000, maxBuffer: 16 * 1024 * 1024 }));
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return void skipWithout(t, 'kubectl', 'it is not installed');
      throw err;
    }
    const key = (m: Manifest): string => `${kindOf(m)} ${m.metadata.name}`;
    const sorted = (ms: Manifest[]): Manifest[] => [...ms].sort((a, b) => key(a).localeCompare(key(b)));
    assert.deepEqual(sorted(parseManifests(output)), sorted(resources.map((r) => r.manifest)));
  });
});

describe('the Deployment', () => {
  test('runs two replicas or more, and a rolling update never lowers capacity', () => {
    assert.ok(deployment().spec!.replicas! >= 2);
    assert.equal(deployment().spec!.strategy?.rollingUpdate?.maxUnavailable, 0);
    assert.ok(selects(deployment().spec!.selector.matchLabels));
  });

  test('checks liveness on /healthz and readiness on /readyz, on the port the server listens on', () => {
    const { startupProbe, livenessProbe, readinessProbe } = server();
    assert.equal(startupProbe?.httpGet?.path, '/healthz');
    assert.equal(livenessProbe?.httpGet?.path, '/healthz');
    assert.equal(readinessProbe?.httpGet?.path, '/readyz');
    for (const probe of [startupProbe, livenessProbe, readinessProbe]) assert.equal(containerPort(probe?.httpGet?.port), config().port);
    assert.equal(server().ports?.length, 1);
  });

  test('pauses before SIGTERM, and gives the drain and the forced exit time before SIGKILL', () => {
    assert.ok('TOOLPORT_SHUTDOWN_GRACE_MS' in configMap().data!, 'the ConfigMap sets the drain grace explicitly');
    const pause = server().lifecycle?.preStop?.sleep?.seconds;
    assert.ok(pause !== undefined && pause >= 5, `a preStop sleep of 5 s or more, got ${pause}`);
    const drain = config().shutdownGraceMs / 1000;
    const grace = podSpec().terminationGracePeriodSeconds!;
    assert.ok(grace > pause + drain + FORCED_EXIT_AFTER_GRACE_S, `terminationGracePeriodSeconds ${grace} > ${pause} + ${drain} + ${FORCED_EXIT_AFTER_GRACE_S}`);
  });

  test('requests and limits CPU and memory', () => {
    const { requests, limits } = server().resources ?? {};
    for (const resource of ['cpu', 'memory']) {
      assert.ok(requests?.[resource] !== undefined, `requests.${resource}`);
      assert.ok(limits?.[resource] !== undefined, `limits.${resource}`);
    }
  });

  test("bounds a Bash call's memory below the container's memory limit, so the reaper stops a call before the OOM killer picks a process", () => {
    const limit = String(server().resources?.limits?.memory);
    const match = /^(\d+)(Mi|Gi)$/.exec(limit);
    assert.ok(match, `limits.memory in Mi or Gi, got ${limit}`);
    const bytes = Number(match[1]) * 1024 ** (match[2] === 'Gi' ? 3 : 2);
    const perCall = config().bashLimits.maxMemory;
    assert.ok(perCall > 0 && perCall < bytes, `TOOLPORT_BASH_MAX_MEMORY ${perCall} < ${bytes}`);
  });

  test('meets the restricted Pod Security Standard', () => {
    assert.deepEqual(restrictedViolations(podSpec()), []);
  });

  test('runs as the image user 1000 on a read-only root, writing only to volumes', () => {
    const pod = podSpec().securityContext!;
    const own = server().securityContext!;
    assert.equal(own.runAsUser ?? pod.runAsUser, 1000);
    assert.equal(own.runAsGroup ?? pod.runAsGroup, 1000);
    assert.equal(own.runAsNonRoot ?? pod.runAsNonRoot, true);
    assert.equal(own.readOnlyRootFilesystem, true);
    assert.equal(own.seccompProfile?.type ?? pod.seccompProfile?.type, 'RuntimeDefault');
    assert.deepEqual(own.capabilities?.drop, ['ALL']);
    const tmp = podSpec().volumes?.find((v) => mountOf(v.name).mountPath === '/tmp');
    assert.ok(tmp?.emptyDir, '/tmp is an emptyDir');
    assert.equal(server().env?.find((e) => e.name === 'HOME')?.value, '/tmp');
  });

  test('mounts no service account token and sets no service environment variables', () => {
    assert.equal(podSpec().automountServiceAccountToken, false);
    assert.equal(podSpec().enableServiceLinks, false);
  });

  test('takes its configuration from the ConfigMap', () => {
    assert.deepEqual(server().envFrom, [{ configMapRef: { name: configMap().metadata!.name } }]);
  });

  test('has Prometheus scrape annotations for /metrics on the server port', () => {
    const annotations = deployment().spec!.template.metadata!.annotations!;
    assert.equal(annotations['prometheus.io/scrape'], 'true');
    assert.equal(annotations['prometheus.io/port'], String(config().port));
    assert.equal(annotations['prometheus.io/path'], '/metrics');
  });
});

describe('the configuration', () => {
  test('is valid for toolport, listens on every address of the pod, requires the Bash sandbox, and counts in Redis', () => {
    assert.equal(config().host, '0.0.0.0');
    assert.equal(config().port, server().ports![0]!.containerPort);
    // Landlock there, as the restricted profile leaves bubblewrap no namespace; none is a refusal to start.
    assert.equal(configMap().data!.TOOLPORT_BASH_SANDBOX, 'true');
    assert.equal(String(config().bashSandbox), 'true');
    assert.equal(config().redisUrl, 'redis://redis:6379');
  });

  test('names only variables toolport reads', () => {
    const read = new Set(CONFIG_VARIABLES.map((variable) => variable.name));
    const unread = Object.keys(configMap().data!).filter((name) => !read.has(name));
    assert.deepEqual(unread, []);
  });

  test('holds no key: the keys file comes from a Secret mounted read-only, outside the workspace', () => {
    assert.ok(!('TOOLPORT_API_KEYS' in configMap().data!));
    const keys = podSpec().volumes?.find((v) => v.secret !== undefined);
    assert.ok(keys?.secret?.secretName, 'a volume from a Secret');
    const mount = mountOf(keys.name);
    assert.equal(mount.readOnly, true);
    assert.equal(keys.secret.defaultMode, 0o440);
    assert.ok(within(config().apiKeysFile!, mount.mountPath), `${config().apiKeysFile} is in ${mount.mountPath}`);
    assert.ok(!within(config().apiKeysFile!, config().workspace));
    assert.ok(!resources.some((r) => r.manifest.kind === 'Secret'), 'the base ships no Secret, so no placeholder key can go live');
  });

  test('serves a workspace on a ReadWriteMany claim of the base, shared by every replica', () => {
    const volume = podSpec().volumes?.find((v) => mountOf(v.name).mountPath === config().workspace);
    const claim = only<IPersistentVolumeClaim>('PersistentVolumeClaim');
    assert.equal(volume?.persistentVolumeClaim?.claimName, claim.metadata!.name);
    assert.deepEqual(claim.spec!.accessModes, ['ReadWriteMany']);
  });
});

describe('around the Deployment', () => {
  test('the Service selects its pods and targets the server port', () => {
    const service = only<IService>('Service');
    assert.ok(selects(service.spec!.selector));
    assert.deepEqual(
      service.spec!.ports!.map((p) => containerPort(p.targetPort)),
      [config().port],
    );
  });

  test('the HorizontalPodAutoscaler scales the Deployment on CPU, never below two replicas', () => {
    const hpa = only<IHorizontalPodAutoscaler>('HorizontalPodAutoscaler');
    assert.deepEqual(hpa.spec!.scaleTargetRef, { apiVersion: 'apps/v1', kind: 'Deployment', name: deployment().metadata!.name });
    const { minReplicas = 1, maxReplicas } = hpa.spec!;
    assert.ok(minReplicas >= 2 && maxReplicas > minReplicas);
    const replicas = deployment().spec!.replicas!;
    assert.ok(replicas >= minReplicas && replicas <= maxReplicas);
    assert.ok(hpa.spec!.metrics?.some((m) => m.resource?.name === 'cpu' && m.resource.target.type === 'Utilization'));
  });

  test('the PodDisruptionBudget lets one replica go at a time', () => {
    const pdb = only<IPodDisruptionBudget>('PodDisruptionBudget');
    assert.ok(selects(pdb.spec!.selector?.matchLabels));
    assert.equal(pdb.spec!.maxUnavailable, 1);
    assert.equal(pdb.spec!.minAvailable, undefined);
  });

  test('the NetworkPolicy lets in only labelled clients of the namespace, and out only Redis and DNS', () => {
    const policy = only<INetworkPolicy>('NetworkPolicy');
    assert.ok(selects(policy.spec!.podSelector?.matchLabels));
    assert.deepEqual([...policy.spec!.policyTypes!].sort(), ['Egress', 'Ingress']);
    assert.deepEqual(policy.spec!.ingress, [
      { from: [{ podSelector: { matchLabels: { 'toolport-client': 'true' } } }], ports: [{ protocol: 'TCP', port: config().port }] },
    ]);
    const redisPort = Number(new URL(configMap().data!.TOOLPORT_REDIS_URL!).port || 6379);
    assert.deepEqual(policy.spec!.egress, [
      { to: [{ podSelector: { matchLabels: { 'app.kubernetes.io/name': 'redis' } } }], ports: [{ protocol: 'TCP', port: redisPort }] },
      {
        to: [{ namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'kube-system' } } }],
        ports: [
          { protocol: 'UDP', port: 53 },
          { protocol: 'TCP', port: 53 },
        ],
      },
    ]);
  });
});
