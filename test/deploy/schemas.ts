import path from 'node:path';
import ts from 'typescript';
import { Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ConfigMap, PersistentVolumeClaim, Service } from 'kubernetes-models/v1';
import type { Manifest } from './kustomize.js';

interface KindModel {
  /** Validates against the Kubernetes OpenAPI schema of the kind; throws what is wrong. */
  model: new (data: never) => { validate(): void };
  /** The module and interface of the kind's TypeScript type, for the check of unknown fields. */
  module: string;
  type: string;
}

/** The kinds the base may hold, by `apiVersion kind`; a kind not here fails the test until it is added. */
export const KINDS: ReadonlyMap<string, KindModel> = new Map([
  ['v1 ConfigMap', { model: ConfigMap, module: 'kubernetes-models/v1/ConfigMap', type: 'IConfigMap' }],
  ['v1 PersistentVolumeClaim', { model: PersistentVolumeClaim, module: 'kubernetes-models/v1/PersistentVolumeClaim', type: 'IPersistentVolumeClaim' }],
  ['v1 Service', { model: Service, module: 'kubernetes-models/v1/Service', type: 'IService' }],
  ['apps/v1 Deployment', { model: Deployment, module: 'kubernetes-models/apps/v1/Deployment', type: 'IDeployment' }],
  [
    'autoscaling/v2 HorizontalPodAutoscaler',
    { model: HorizontalPodAutoscaler, module: 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler', type: 'IHorizontalPodAutoscaler' },
  ],
  ['policy/v1 PodDisruptionBudget', { model: PodDisruptionBudget, module: 'kubernetes-models/policy/v1/PodDisruptionBudget', type: 'IPodDisruptionBudget' }],
  ['networking.k8s.io/v1 NetworkPolicy', { model: NetworkPolicy, module: 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy', type: 'INetworkPolicy' }],
]);

export const kindOf = (manifest: Manifest): string => `${manifest.apiVersion} ${manifest.kind}`;

/** Validates a manifest against its kind's schema; throws when the kind is unknown or the manifest invalid. */
export function validateSchema(manifest: Manifest): void {
  const kind = KINDS.get(kindOf(manifest));
  if (kind === undefined) throw new Error(`no schema for ${kindOf(manifest)}: add its kubernetes-models class to KINDS`);
  new kind.model(manifest as never).validate();
}

// The declaration files of the kinds and the language, parsed once for every check.
const declarations = new Map<string, ts.SourceFile>();

/**
 * The fields that the Kubernetes API does not know, as the TypeScript compiler reports them, each
 * after the kind of its resource. The OpenAPI schemas leave objects open (no `additionalProperties: false`),
 * so a misspelt `readinesProbe` passes `validate()` and is dropped, or refused, by the API server;
 * kubernetes-models' types are closed, and an object literal checked against them names every
 * property they lack. The manifests become one virtual module beside this file, typed with
 * the kinds' interfaces.
 */
export function unknownFields(manifests: readonly Manifest[]): string[] {
  const file = path.join(import.meta.dirname, '__manifests__.ts');
  const kinds = manifests.map((m) => KINDS.get(kindOf(m)));
  const imports = kinds.map((k, i) => (k ? `import type { ${k.type} as T${i} } from '${k.module}';` : ''));
  const constants = manifests.map((m, i) => `export const m${i}: ${kinds[i] ? `T${i}` : 'unknown'} = ${literal(m)};`);
  const text = [...imports, ...constants].join('\n');

  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
    // The language only: the DOM's declarations, the default, take most of the compile time.
    lib: ['lib.es2022.d.ts'],
    target: ts.ScriptTarget.ES2022,
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
  };
  const host = ts.createCompilerHost(options);
  const readSource = host.getSourceFile.bind(host);
  const exists = host.fileExists.bind(host);
  host.getSourceFile = (name, language, ...rest) => {
    if (path.resolve(name) === file) return ts.createSourceFile(name, text, language);
    let source = declarations.get(name);
    if (source === undefined) {
      source = readSource(name, language, ...rest);
      if (source !== undefined) declarations.set(name, source);
    }
    return source;
  };
  host.fileExists = (name) => path.resolve(name) === file || exists(name);
  const program = ts.createProgram([file], options, host);
  return ts.getPreEmitDiagnostics(program).map((diagnostic) => {
    const { file: source, start } = diagnostic;
    const line = source && start !== undefined && path.resolve(source.fileName) === file ? source.getLineAndCharacterOfPosition(start).line : -1;
    const where = line >= imports.length ? `${manifests[line - imports.length]!.kind}: ` : '';
    return where + ts.flattenDiagnosticMessageText(diagnostic.messageText, ' ');
  });
}

const IDENTIFIER = /^[A-Za-z_$][\w$]*$/;

/** A value as a TypeScript literal, with bare property names where they can be, so messages name them as written. */
function literal(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(literal).join(', ')}]`;
  if (typeof value === 'object' && value !== null) {
    const entries = Object.entries(value).map(([key, v]) => `${IDENTIFIER.test(key) ? key : JSON.stringify(key)}: ${literal(v)}`);
    return `{ ${entries.join(', ')} }`;
  }
  return JSON.stringify(value);
}
