/**
 * Prints the base's ConfigMap and Deployment, bound to its workspace claim, as one YAML stream for
 * `podman kube play`, for the container check (scripts/test-container.sh):
 *
 *   node --import tsx test/deploy/podman-play.ts IMAGE NAME HOST_PORT KEYS_DIR [VAR=VALUE...] > play.yaml
 *
 * Each VAR=VALUE is added to the container's environment, as an operator would add a secret of
 * their own (the container check puts one there for a Bash call to look for).
 *
 * What podman cannot play as Kubernetes would is changed, and only that:
 * - one replica, named NAME, published on 127.0.0.1:HOST_PORT (podman makes each replica a pod
 *   and publishes a containerPort on every address of the host, 8080 for each);
 * - volumes named after NAME (podman makes an emptyDir or a claim a named volume of that name);
 * - the claim itself left out: podman refuses to play a claim whose volume exists, and the check
 *   makes the volume first (named NAME-toolport-workspace), with the keys' workspaces in it, as a
 *   cluster's provisioner and its operator would;
 * - the keys Secret replaced by the host directory KEYS_DIR, mounted read-only all the same
 *   (podman 4.3, Debian 12's, crashes on a secret volume without `optional`, and writes a Secret's
 *   data still base64-encoded);
 * - no TOOLPORT_REDIS_URL: no Redis runs in the container check.
 */
import { stringify } from 'yaml';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { buildBase } from './kustomize.js';

const [image, name, hostPort, keysDir, ...variables] = process.argv.slice(2);
if (!image || !name || !hostPort || !keysDir || variables.some((v) => !/^[A-Z_][A-Z0-9_]*=/.test(v))) {
  process.stderr.write('usage: podman-play.ts IMAGE NAME HOST_PORT KEYS_DIR [VAR=VALUE...]\n');
  process.exit(2);
}

const { resources } = await buildBase();
const one = <T>(kind: string): T => structuredClone(resources.find((r) => r.manifest.kind === kind)!.manifest) as unknown as T;
const configMap = one<IConfigMap>('ConfigMap');
const claim = one<IPersistentVolumeClaim>('PersistentVolumeClaim');
const deployment = one<IDeployment>('Deployment');

delete configMap.data!.TOOLPORT_REDIS_URL;
const claimName = `${name}-${claim.metadata!.name}`;
claim.metadata!.name = claimName;

deployment.metadata!.name = name;
deployment.spec!.replicas = 1;
const pod = deployment.spec!.template.spec!;
const container = pod.containers[0]!;
container.image = image;
for (const variable of variables) {
  const at = variable.indexOf('=');
  (container.env ??= []).push({ name: variable.slice(0, at), value: variable.slice(at + 1) });
}
for (const port of container.ports ?? []) Object.assign(port, { hostIP: '127.0.0.1', hostPort: Number(hostPort) });
for (const volume of pod.volumes ?? []) {
  const renamed = `${name}-${volume.name}`;
  for (const mount of container.volumeMounts ?? []) if (mount.name === volume.name) mount.name = renamed;
  volume.name = renamed;
  if (volume.persistentVolumeClaim) volume.persistentVolumeClaim.claimName = claimName;
  if (volume.secret) {
    delete volume.secret;
    volume.hostPath = { path: keysDir, type: 'Directory' };
  }
}

process.stdout.write([configMap, deployment].map((manifest) => stringify(manifest)).join('---\n'));
