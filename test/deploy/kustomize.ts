import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';

/** The kustomize base under test. */
export const BASE_DIR = path.resolve(import.meta.dirname, '../../deploy/kubernetes');

/** What every Kubernetes object has; the rest is checked against the schemas. */
export interface Manifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; [field: string]: unknown };
  [field: string]: unknown;
}

/** A resource of the base and the file it came from. */
export interface Resource {
  file: string;
  manifest: Manifest;
}

// The fields of a kustomization this builder understands. A generator, a patch or a transformer
// would change what kustomize builds, so the builder refuses one rather than build something else.
const KUSTOMIZATION_FIELDS = new Set(['apiVersion', 'kind', 'resources']);

/**
 * Builds a kustomize base of plain resources as kustomize would, without kustomize: reads the
 * kustomization, then every document of every listed file, in order. Parses YAML 1.1, as
 * Kubernetes' own YAML reader does, so that `0440` is an octal mode and `yes` a boolean there too.
 */
export async function buildBase(dir = BASE_DIR): Promise<{ resourceFiles: string[]; resources: Resource[] }> {
  const kustomization = parseOne(await readFile(path.join(dir, 'kustomization.yaml'), 'utf8'), 'kustomization.yaml');
  const unknown = Object.keys(kustomization).filter((field) => !KUSTOMIZATION_FIELDS.has(field));
  if (unknown.length > 0)
    throw new Error(`kustomization.yaml: ${unknown.join(', ')} not understood by this builder; teach it or keep the base to plain resources`);
  const resourceFiles = kustomization.resources;
  if (!Array.isArray(resourceFiles) || !resourceFiles.every((f): f is string => typeof f === 'string')) {
    throw new Error('kustomization.yaml: resources must be a list of file names');
  }
  const resources: Resource[] = [];
  for (const file of resourceFiles) {
    const documents = parseAllDocuments(await readFile(path.join(dir, file), 'utf8'), { version: '1.1' });
    for (const document of documents) {
      if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0]!.message}`);
      const manifest: unknown = document.toJS();
      if (manifest === null) continue;
      if (!isManifest(manifest)) throw new Error(`${file}: a document without apiVersion, kind and metadata.name`);
      resources.push({ file, manifest });
    }
  }
  return { resourceFiles, resources };
}

/** Parses YAML text of one or more documents (kubectl's output, say) into the objects. */
export function parseManifests(text: string): Manifest[] {
  return parseAllDocuments(text, { version: '1.1' }).flatMap((document) => {
    const manifest: unknown = document.toJS();
    if (manifest === null) return [];
    if (!isManifest(manifest)) throw new Error('a document without apiVersion, kind and metadata.name');
    return [manifest];
  });
}

function parseOne(text: string, file: string): Record<string, unknown> {
  const value: unknown = parseAllDocuments(text, { version: '1.1' })[0]?.toJS();
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new Error(`${file}: not a YAML mapping`);
  return value as Record<string, unknown>;
}

function isManifest(value: unknown): value is Manifest {
  if (typeof value !== 'object' || value === null) return false;
  const { apiVersion, kind, metadata } = value as Record<string, unknown>;
  return typeof apiVersion === 'string' && typeof kind === 'string' && typeof (metadata as { name?: unknown } | undefined)?.name === 'string';
}
