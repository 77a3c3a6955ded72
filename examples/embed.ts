// Run toolport inside your own service, with your own tools: `npx tsx examples/embed.ts`.
import { buildApp, createLogger, defineTool, Echo, textResult, ToolRegistry, Type } from 'toolport';

const WordCount = defineTool({
  name: 'WordCount',
  description: 'Counts the words in a text. Use it when you need an exact word count.',
  inputSchema: Type.Object({ text: Type.String({ description: 'The text to count.' }) }, { additionalProperties: false }),
  annotations: { title: 'Word count', readOnlyHint: true },
  // `text` is typed as string, from the schema above.
  execute: ({ text }) => textResult(String(text.split(/\s+/).filter(Boolean).length)),
});

const registry = new ToolRegistry().register(Echo).register(WordCount);
const app = await buildApp({ registry, logger: createLogger('info') });
await app.listen({ port: Number(process.env.PORT ?? 3000), host: '127.0.0.1' });

for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => void app.toolport.shutdown(10_000).then(() => process.exit(0)));
}
