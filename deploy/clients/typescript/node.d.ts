// The little of Node that journey.js uses (no @types/node to install).
declare const process: { argv: string[]; env: Record<string, string | undefined>; exit(code: number): never };
