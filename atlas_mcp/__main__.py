from atlas_mcp.cli import main

main()
