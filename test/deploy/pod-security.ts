import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';

// The volume types the restricted profile admits.
const RESTRICTED_VOLUMES = new Set(['configMap', 'csi', 'downwardAPI', 'emptyDir', 'ephemeral', 'persistentVolumeClaim', 'projected', 'secret']);
const SECCOMP_ALLOWED = new Set(['RuntimeDefault', 'Localhost']);

/**
 * What in a pod spec the `restricted` Pod Security Standard (which includes `baseline`) refuses,
 * one sentence each; empty when the pod would be admitted to a namespace labelled
 * `pod-security.kubernetes.io/enforce: restricted`. Follows the standard's controls as the
 * Kubernetes documentation lists them, for the fields a Linux pod can set.
 */
export function restrictedViolations(pod: IPodSpec): string[] {
  const problems: string[] = [];
  const containers = [...(pod.initContainers ?? []), ...pod.containers, ...(pod.ephemeralContainers ?? [])];
  if (pod.hostNetwork || pod.hostPID || pod.hostIPC) problems.push('host namespaces are shared');
  for (const volume of pod.volumes ?? []) {
    const types = Object.keys(volume).filter((key) => key !== 'name');
    for (const type of types) if (!RESTRICTED_VOLUMES.has(type)) problems.push(`volume ${volume.name} is of type ${type}`);
  }
  const podContext = pod.securityContext ?? {};
  if (podContext.runAsUser === 0) problems.push('the pod runs as uid 0');
  for (const sysctl of podContext.sysctls ?? []) problems.push(`sysctl ${sysctl.name} is set`);
  if (podContext.seLinuxOptions?.user || podContext.seLinuxOptions?.role) problems.push('the pod sets an SELinux user or role');
  if (podContext.appArmorProfile?.type === 'Unconfined') problems.push('the pod runs without AppArmor');
  for (const container of containers) {
    const own = container.securityContext ?? {};
    const who = `container ${container.name}`;
    if (own.privileged) problems.push(`${who} is privileged`);
    if (own.allowPrivilegeEscalation !== false) problems.push(`${who} does not set allowPrivilegeEscalation: false`);
    if (!(own.runAsNonRoot ?? podContext.runAsNonRoot)) problems.push(`${who} does not set runAsNonRoot: true`);
    if (own.runAsUser === 0) problems.push(`${who} runs as uid 0`);
    const seccomp = own.seccompProfile?.type ?? podContext.seccompProfile?.type;
    if (seccomp === undefined || !SECCOMP_ALLOWED.has(seccomp))
      problems.push(`${who} has seccomp profile ${seccomp ?? '(none)'}, not RuntimeDefault or Localhost`);
    if (!own.capabilities?.drop?.includes('ALL')) problems.push(`${who} does not drop ALL capabilities`);
    for (const added of own.capabilities?.add ?? []) if (added !== 'NET_BIND_SERVICE') problems.push(`${who} adds capability ${added}`);
    if (own.procMount !== undefined && own.procMount !== 'Default') problems.push(`${who} has procMount ${own.procMount}`);
    if (own.seLinuxOptions?.user || own.seLinuxOptions?.role) problems.push(`${who} sets an SELinux user or role`);
    if (own.appArmorProfile?.type === 'Unconfined') problems.push(`${who} runs without AppArmor`);
    if (own.windowsOptions?.hostProcess) problems.push(`${who} is a Windows host process`);
    for (const port of container.ports ?? []) if (port.hostPort) problems.push(`${who} uses host port ${port.hostPort}`);
  }
  return problems;
}
